package filelock

import (
	"fmt"
	"os"
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
