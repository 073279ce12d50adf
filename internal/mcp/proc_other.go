//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without process groups only the server itself is stopped.

type sig int

const (
	sigTerm sig = iota
	sigKill
)

func setProcessGroup(*exec.Cmd) {}

func signalGroup(pid int, _ sig) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func reap(cmd *exec.Cmd) error { return cmd.Wait() }
