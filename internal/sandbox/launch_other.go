//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

func kernelABI() int { return 0 }

func restrictAndRun(Policy, string, []string, []string) (int, error) {
	return 0, errors.New("the sandbox needs Linux's Landlock; refusing to run the command unconfined")
}

func isolate(*exec.Cmd, bool) {}

func probeIsolation(string) string { return IsolationSubreaper }

func probe() int { return 1 }

// Harden does nothing where there is no PR_SET_DUMPABLE.
func Harden() error { return nil }
