package session

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplaceOS is renameat2(RENAME_NOREPLACE): one atomic step that
// fails with EEXIST instead of replacing newpath. errors.ErrUnsupported
// when the kernel or file system lacks it (renameNoReplace falls back).
func renameNoReplaceOS(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return errors.ErrUnsupported
	}
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
}
