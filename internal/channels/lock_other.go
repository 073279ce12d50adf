//go:build !unix

package channels

// lockFile is a no-op where flock is unavailable: writes stay atomic, but a
// CLI approval racing the daemon issuing a code may lose one of the two.
func lockFile(string) (func(), error) { return func() {}, nil }
