//go:build unix

package tools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func processGroupsSupported() error { return nil }

// setProcessGroup makes the command the leader of a new process group, so
// that it and every process it starts can be killed together. It keeps
// what the Confiner set (namespaces, the parent-death signal).
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// askToStop sends SIGTERM to the launcher alone: it kills every process
// the command started, also those that left the process group, and exits.
func askToStop(pid int) error {
	err := syscall.Kill(pid, syscall.SIGTERM)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// killProcessGroup sends SIGKILL to every process in the group pgid. A group
// that is already gone is not an error. (The group id is the leader's pid,
// which the kernel does not reuse while any member of the group lives.)
func killProcessGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// exitStatus describes how the shell ended: "exit code 0" or "killed by
// signal 9 (killed)".
func exitStatus(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", ws.Signal(), ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}
