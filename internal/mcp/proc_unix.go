//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

type sig = syscall.Signal

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// setProcessGroup makes the server the leader of a new process group, so
// that it and everything it starts can be signalled together (and a Ctrl-C
// meant for the daemon does not reach it before the daemon stops it).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group led by pid. A group that is
// already gone is not an error.
func signalGroup(pid int, s sig) {
	_ = syscall.Kill(-pid, s)
}
