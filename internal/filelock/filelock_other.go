//go:build !unix

package filelock

import "os"

// Hold does not lock where flock is unavailable: writes stay atomic, but
// two processes updating a shared file at the same instant may lose one
// update. Goroutines of one process are kept apart by the callers' mutexes.
func Hold(f *os.File) (release func(), err error) {
	return func() { _ = f.Close() }, nil
}
