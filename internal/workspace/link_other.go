//go:build !unix

package workspace

import "io/fs"

func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }

func isNotDir(error) bool { return false }
