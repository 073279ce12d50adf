//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// kernelABI asks the kernel for its Landlock ABI version.
func kernelABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// restrictAndRun applies p to this process and runs path under its
// supervision (supervise), returning the exit status. It never runs a
// command unconfined: without Landlock it fails.
func restrictAndRun(p Policy, path string, argv, env []string) (int, error) {
	abi := kernelABI()
	if abi < 1 {
		return 0, errors.New("this kernel has no Landlock; refusing to run the command unconfined")
	}
	// Capabilities and the Landlock domain are per thread: set them up on
	// the thread that forks the command (it inherits that thread's).
	runtime.LockOSThread()
	if err := prepare(); err != nil {
		return 0, err
	}
	cfg := landlock.V11.BestEffort()
	var rules []landlock.Rule
	for _, g := range p.Grants() {
		rules = append(rules, rule(g, abi))
	}
	if p.Network {
		// Connect only to the chosen TCP ports; bind, and UDP, stay free.
		cfg.HandledAccessNet = landlock.AccessNetSet(llsys.AccessNetConnectTCP)
		for _, port := range p.ConnectPorts {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	if err := dropCapabilities(); err != nil {
		return 0, err
	}
	if err := cfg.Restrict(rules...); err != nil {
		return 0, fmt.Errorf("landlock: %w", err)
	}
	return supervise(path, argv, env), nil
}

// dropCapabilities empties the bounding and ambient capability sets, so
// that a command started by a root daemon runs as a root without
// capabilities. Landlock lets a confined process read /proc/PID/environ of
// processes outside its domain (it checks ptrace attach, not read); the
// daemon is non-dumpable (Harden), which closes its entries to anyone
// without CAP_SYS_PTRACE, and this makes sure the command has not got it.
// A non-root launcher has nothing to drop (PR_CAPBSET_DROP then fails with
// EPERM, and no_new_privs keeps file capabilities from being gained).
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP+8; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINVAL): // past the kernel's last capability
			return nil
		case errors.Is(err, unix.EPERM): // no CAP_SETPCAP: not root, nothing to drop
			return nil
		default:
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// rule is the Landlock rule of one grant. Writable hierarchies may also
// rename and link between their directories (the "refer" right, ABI 2; on
// ABI 1 asking for it would make go-landlock drop every rule).
func rule(g Grant, abi int) landlock.Rule {
	switch {
	case g.List:
		return landlock.PathAccess(llsys.AccessFSReadDir, g.Path).IgnoreIfMissing()
	case g.File && g.Write:
		return landlock.RWFiles(g.Path).IgnoreIfMissing()
	case g.File:
		return landlock.ROFiles(g.Path).IgnoreIfMissing()
	case g.Write && abi >= 2:
		return landlock.RWDirs(g.Path).WithRefer().IgnoreIfMissing()
	case g.Write:
		return landlock.RWDirs(g.Path).IgnoreIfMissing()
	default:
		return landlock.RODirs(g.Path).IgnoreIfMissing()
	}
}

// Harden makes this process non-dumpable: no core dumps, and its /proc
// entries (environ, mem, fd) belong to root, so another process of the same
// user cannot read its keys there even without Landlock. (Root could;
// Landlock's ptrace rule is what stops a confined root command.)
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
