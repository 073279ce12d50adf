package main

import (
	"encoding/json"
	"os/exec"
	"slices"
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
	run := func(b *testing.B, argv ...string) {
		times := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = ws
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
	}
	b.Run("off", func(b *testing.B) { run(b, "/bin/sh", "-c", "true") })
	b.Run("landlock", func(b *testing.B) {
		if sandbox.ABI() < 1 {
			b.Skip("this kernel has no Landlock")
		}
		run(b, binary, sandbox.LauncherArg, string(spec), "/bin/sh", "-c", "true")
	})
}
