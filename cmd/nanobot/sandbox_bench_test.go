package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/sandbox"
)

// BenchmarkExecSandbox measures what the launcher adds to one command: the
// exec tool's `/bin/sh -c true`, started directly (sandbox: off) and
// through the real binary's __sandbox-exec with the workspace's policy
// (one more exec, the Go runtime's start, the ruleset). It reports the
// median next to the mean, which a slow outlier moves.
//
//	go test -run '^$' -bench BenchmarkExecSandbox -count 3 ./cmd/nanobot
func BenchmarkExecSandbox(b *testing.B) {
	ws := b.TempDir()
	policy, err := sandbox.NewPolicy(ws, nil, nil, true)
	if err != nil {
		b.Fatal(err)
	}
	policy.ReadWrite = append(policy.ReadWrite, b.TempDir())
	spec, err := json.Marshal(policy)
	if err != nil {
		b.Fatal(err)
	}
	runWith := func(b *testing.B, attr *syscall.SysProcAttr, argv ...string) {
		times := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = ws
			cmd.SysProcAttr = attr
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
	}
	run := func(b *testing.B, argv ...string) { runWith(b, nil, argv...) }
	b.Run("off", func(b *testing.B) { run(b, "/bin/sh", "-c", "true") })
	b.Run("landlock", func(b *testing.B) {
		if sandbox.ABI() < 1 {
			b.Skip("this kernel has no Landlock")
		}
		run(b, binary, sandbox.LauncherArg, string(spec), "/bin/sh", "-c", "true")
	})
	// As the exec tool starts it where the kernel allows: in a PID and a
	// mount namespace of its own, which it gives a /proc of its own
	// (docs/tools.md#processes). Root only here (an unprivileged daemon
	// adds a user namespace).
	b.Run("landlock+pidns", func(b *testing.B) {
		if sandbox.ABI() < 1 || os.Geteuid() != 0 {
			b.Skip("needs Landlock and root")
		}
		runWith(b, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGTERM, Setpgid: true},
			binary, sandbox.LauncherArg, string(spec), "/bin/sh", "-c", "true")
	})
}
