//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"syscall"

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

// restrictAndExec applies p to this process and replaces it with path.
// It never runs a command unconfined: without Landlock it fails.
func restrictAndExec(p Policy, path string, argv, env []string) error {
	abi := kernelABI()
	if abi < 1 {
		return errors.New("this kernel has no Landlock; refusing to run the command unconfined")
	}
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg.HandledAccessNet = 0 // no TCP (or, from ABI 10, UDP) rule at all
	}
	var rules []landlock.Rule
	for _, g := range p.Grants() {
		rules = append(rules, rule(g, abi))
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := syscall.Exec(path, argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// rule is the Landlock rule of one grant. Writable hierarchies may also
// rename and link between their directories (the "refer" right, ABI 2; on
// ABI 1 asking for it would make go-landlock drop every rule).
func rule(g Grant, abi int) landlock.Rule {
	switch {
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
