package mcp

import (
	"errors"
	"os/exec"

	"golang.org/x/sys/unix"
)

// reap waits for the server to exit, kills whatever is left in its process
// group while the server's unreaped zombie still holds the group id (so the
// signal cannot reach a process group that reused the id), then reaps it.
func reap(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	signalGroup(pid, sigKill)
	return cmd.Wait()
}
