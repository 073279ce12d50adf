package filelock

import (
	"fmt"
	"os"
	"sync"
)

// Acquire opens the lock file path, creating it (mode 0600), and holds an
// exclusive lock on it until release is called.
func Acquire(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return Hold(f)
}

// WithMutex takes mu and then the cross-process lock acquire takes, for a
// check and write of a file whose contents a process also keeps in memory:
// mu guards the copy, the file's lock the file. release gives up both, the
// file's lock first. When acquire fails, mu is released again and acquire's
// error returned.
func WithMutex(mu sync.Locker, acquire func() (release func(), err error)) (release func(), err error) {
	mu.Lock()
	unlock, err := acquire()
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	return func() {
		unlock()
		mu.Unlock()
	}, nil
}
