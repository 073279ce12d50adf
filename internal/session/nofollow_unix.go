//go:build unix

package session

import "syscall"

// oNoFollow makes opening a session file fail if it is a symbolic link, so a
// link planted in sessions/ cannot redirect the daemon's writes elsewhere.
const oNoFollow = syscall.O_NOFOLLOW
