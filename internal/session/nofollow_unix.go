//go:build unix

package session

import (
	"os"
	"strconv"
	"syscall"
)

// oNoFollow makes opening a session file fail if it is a symbolic link, so a
// link planted in sessions/ cannot redirect the daemon's writes elsewhere.
const oNoFollow = syscall.O_NOFOLLOW

// oDirectory makes opening fail unless the path is a directory.
const oDirectory = syscall.O_DIRECTORY

// linkCount returns the number of hard links of the file fi describes.
func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// dirPath names the open directory d so that no later step looks its path
// up again: /proc/self/fd/N leads to the directory d is, whatever is at
// its path now. Without /proc it is the path (checked when d was opened).
func dirPath(d *os.File, path string) string {
	p := "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))
	if a, err := d.Stat(); err == nil {
		if b, err := os.Stat(p); err == nil && os.SameFile(a, b) {
			return p
		}
	}
	return path
}
