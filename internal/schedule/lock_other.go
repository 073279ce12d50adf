//go:build !unix

package schedule

// lockFile is a no-op where flock is unavailable: writes stay atomic, but
// two processes changing jobs at the same instant may lose one change.
func lockFile(string) (func(), error) { return func() {}, nil }
