//go:build !linux

package sandbox

import "errors"

func kernelABI() int { return 0 }

func restrictAndExec(Policy, string, []string, []string) error {
	return errors.New("the sandbox needs Linux's Landlock; refusing to run the command unconfined")
}

// Harden does nothing where there is no PR_SET_DUMPABLE.
func Harden() error { return nil }
