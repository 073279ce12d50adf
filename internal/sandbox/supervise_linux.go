//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// exit codes of the probe.
const (
	probeOwnProc  = 10
	probeHostProc = 11
)

// namespaceFlags are the clone flags of the launcher: a PID and a mount
// namespace, and a user namespace when the daemon is not root (an
// unprivileged process needs one to make the others).
func namespaceFlags() (flags uintptr, user bool) {
	flags = unix.CLONE_NEWPID | unix.CLONE_NEWNS
	if os.Geteuid() != 0 {
		flags |= unix.CLONE_NEWUSER
		user = true
	}
	return flags, user
}

// isolate sets cmd up to start in namespaces of its own when ns is set,
// and in every case to get SIGTERM when the daemon's thread that started it
// dies, so that it stops its command's processes with it.
func isolate(cmd *exec.Cmd, ns bool) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if ns {
		flags, user := namespaceFlags()
		attr.Cloneflags = flags
		if user {
			// The daemon's user is root inside, so that the launcher may
			// mount the namespace's /proc; outside it is still the
			// daemon's user (files the command makes are that user's), and
			// the launcher drops every capability before the command runs.
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			attr.GidMappingsEnableSetgroups = false
		}
	}
	cmd.SysProcAttr = attr
}

// probeIsolation starts the launcher once in namespaces to learn which
// isolation this kernel and service manager allow.
func probeIsolation(exe string) string {
	cmd := exec.Command(exe, LauncherArg, probeArg)
	cmd.Env = []string{}
	isolate(cmd, true)
	err := cmd.Run()
	// A namespace whose /proc cannot be mounted anew is not used: the
	// launcher's own /proc/self would be the daemon's namespace's PID 1
	// (and go-landlock's all-threads restriction reads it).
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == probeOwnProc {
		return IsolationPIDNamespace
	}
	return IsolationSubreaper
}

// probe runs in the launcher started by probeIsolation.
func probe() int {
	if os.Getpid() != 1 {
		return 1
	}
	if mountProc() != nil {
		return probeHostProc
	}
	return probeOwnProc
}

// mountProc gives a launcher that is PID 1 of its own namespace a /proc of
// that namespace, in its own mount namespace (made private first, so that
// the mount does not reach the daemon's). It must run before Landlock,
// which forbids mounting.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// prepare is the launcher's set-up before Landlock: its namespace's /proc
// (when it is PID 1 of one), the subreaper bit, and no descriptor but
// 0, 1 and 2 for what it starts.
func prepare() error {
	if os.Getpid() == 1 {
		if err := mountProc(); err != nil {
			return err // the probe said it works; refuse rather than run half-isolated
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	// Whatever the daemon let through (a descriptor a library opened
	// without O_CLOEXEC) closes at the command's exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("close_range: %w", err)
	}
	return nil
}

// supervise starts the command, waits for it, and then kills every process
// it left; on SIGTERM (the exec tool's stop, or the daemon's death) it kills
// them at once. It returns the launcher's exit status: the command's, or
// 128+N when a signal N ended it (the launcher cannot die of it: as PID 1 of
// a namespace it ignores signals it sent itself).
func supervise(path string, argv, env []string) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nanobot sandbox: exec %s: %v\n", path, err)
		return 126
	}
	done := make(chan syscall.WaitStatus, 1)
	go func() { done <- reapUntil(pid) }()
	select {
	case ws := <-done:
		killDescendants()
		reapAll()
		return statusCode(ws)
	case <-stop:
		killDescendants()
		ws := <-done
		reapAll()
		return statusCode(ws)
	}
}

// reapUntil reaps every child (orphans re-parent here) until pid ends, and
// returns how it ended.
func reapUntil(pid int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return ws // ECHILD: nothing left, pid included
		case got == pid:
			return ws
		}
	}
}

// reapAll reaps what the kill left, until no child remains.
func reapAll() {
	for {
		_, err := syscall.Wait4(-1, nil, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
	}
}

// killDescendants sends SIGKILL to every process below the launcher. As
// PID 1 of a namespace, kill(-1) reaches all of them at once, whatever they
// did to leave the process group. Otherwise they are found through
// /proc/self/task/*/children, again and again until none is left: a
// process forking meanwhile shows its child on the next look, and the
// children of a killed one re-parent to the launcher (a subreaper).
func killDescendants() {
	if os.Getpid() == 1 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	for range 1000 {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// descendants lists the processes below pid, read from
// /proc/PID/task/*/children; zombies (already dead, waiting to be reaped)
// are skipped.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			data, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				c, err := strconv.Atoi(f)
				if err != nil || zombie(c) {
					continue
				}
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	// The state follows the command name in parentheses, which may hold
	// spaces and parentheses itself.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

func statusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
