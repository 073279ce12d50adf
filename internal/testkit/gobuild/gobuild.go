// Package gobuild builds the binaries that end-to-end tests run (nanobot,
// nats-server, the bench's probes) the way the running test binary was
// built: with the race detector when the tests run with -race, without it
// otherwise. A binary built so shares the build cache with the test's own
// packages, so a CI run compiles the tree once instead of once per set of
// flags (README, "Development": one compile).
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
)

// Flags are the go build flags that match this test binary's build.
func Flags() []string {
	if raceEnabled {
		return []string{"-race"}
	}
	return nil
}

// Env is what a binary from Build wants in its environment besides what a
// test gives it. Under -race: no second's sleep before exit (the race
// runtime's default atexit_sleep_ms=1000, which the end-to-end tests,
// starting hundreds of processes, would otherwise wait out one by one), and
// a data race ends the process at once with exit status 66, so the test
// that drove it fails instead of passing over a report in a log.
func Env() []string {
	if raceEnabled {
		return []string{"GORACE=atexit_sleep_ms=0 halt_on_error=1"}
	}
	return nil
}

// Build runs `go build -o out pkg` in dir ("" for the current directory)
// with Flags, and returns go build's output with the error.
func Build(dir, out, pkg string) error {
	args := slices.Concat([]string{"build"}, Flags(), []string{"-o", out, pkg})
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	return nil
}
