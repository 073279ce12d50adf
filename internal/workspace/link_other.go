//go:build !unix

package workspace

import "io/fs"

func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }

func isNotDir(error) bool { return false }

// Without these flags the checks after the open still hold; only a FIFO's
// open may block (there are no FIFOs in a Windows workspace).
const (
	oNonblock  = 0
	oDirectory = 0
	oNoFollow  = 0
)

func isNoReader(error) bool { return false }
