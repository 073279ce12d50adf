//go:build !unix

package session

import "os"

// oNoFollow is unavailable here; see nofollow_unix.go.
const oNoFollow = 0

// oDirectory is unavailable here.
const oDirectory = 0

func linkCount(os.FileInfo) (uint64, bool) { return 0, false }

func dirPath(_ *os.File, path string) string { return path }
