//go:build !linux

package main

import "os"

// isTTY is isTerminal where the terminal ioctl is not wired up.
func isTTY(f *os.File) bool { return isTerminal(f) }
