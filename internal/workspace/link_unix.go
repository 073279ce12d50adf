//go:build unix

package workspace

import (
	"errors"
	"io/fs"
	"syscall"
)

// linkCount returns the number of hard links of the file fi describes.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// Open flags of the daemon's access: never block on a FIFO or take a
// terminal; a directory only; no link at the last component.
const (
	oNonblock  = syscall.O_NONBLOCK | syscall.O_NOCTTY
	oDirectory = syscall.O_DIRECTORY
	oNoFollow  = syscall.O_NOFOLLOW
)

func isNoReader(err error) bool { return errors.Is(err, syscall.ENXIO) }
