package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTTY reports whether f is a terminal: it answers the terminal ioctl.
// A character device alone is not enough (/dev/null is one).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
