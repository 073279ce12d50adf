//go:build unix

package filelock

import (
	"fmt"
	"os"
	"syscall"
)

// Hold takes an exclusive lock on f, waiting while another holder has it.
// release unlocks and closes f; on error f is closed too.
func Hold(f *os.File) (release func(), err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		// A signal delivered to the waiting thread interrupts the wait;
		// that is not a reason to give up the write.
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
