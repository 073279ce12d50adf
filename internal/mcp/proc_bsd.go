//go:build unix && !linux

package mcp

import "os/exec"

// reap waits for the server to exit and reaps it, then kills whatever is
// left in its process group. (Without waitid's WNOWAIT the group is
// signalled after the reap; the kernel keeps the id reserved while any
// member lives, so only a group created in that instant could be hit.)
func reap(cmd *exec.Cmd) error {
	err := cmd.Wait()
	signalGroup(cmd.Process.Pid, sigKill)
	return err
}
