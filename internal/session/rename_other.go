//go:build !linux

package session

import "errors"

// renameNoReplaceOS has no single system call here; renameNoReplace links
// and removes instead.
func renameNoReplaceOS(oldpath, newpath string) error { return errors.ErrUnsupported }
