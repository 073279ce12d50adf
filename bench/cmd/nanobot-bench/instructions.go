package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The instructions scenario counts what a turn costs in instructions, a
// figure a busy, shared host does not move the way it moves CPU time: on the
// machine these benchmarks run on, single runs of the CPU figures move by
// ±15 %. A VM often exposes no hardware counters, so the gateway runs under
// valgrind's cachegrind, which counts every instruction it executes (with
// its cache simulation off, ~30 times slower than native). Two load runs of
// one chat differ only in their window's length; the difference of their
// totals over the difference of their turns is a turn's instructions, with
// start-up, warm-up and shutdown cancelled out.

// instructionsResult is one measurement: the short and the long run, and
// the instructions of a turn.
type instructionsResult struct {
	Short, Long instructionsRun
	PerTurn     float64
}

// instructionsRun is one gateway's life under cachegrind.
type instructionsRun struct {
	Window       time.Duration
	Turns        int
	Instructions uint64
}

// Under valgrind the gateway runs with one P, because valgrind runs one
// thread at a time and an idle P's spinning would count time rather than
// work, and without asynchronous preemption, whose signals only add noise.
const (
	valgrindMaxprocs = "GOMAXPROCS=1"
	valgrindGodebug  = "asyncpreemptoff=1"
)

// valgrindTool is how the harness wraps the gateway in one of valgrind's
// tools.
type valgrindTool interface {
	// command returns the command line that runs bin with args.
	command(bin string, args []string) (string, []string)
}

// runInstructions measures one chat's turns under cachegrind, with windows
// of o.window and three times that.
func runInstructions(ctx context.Context, o options) (instructionsResult, error) {
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		return instructionsResult{}, fmt.Errorf("the instructions scenario runs the gateway under valgrind, which is not installed (Debian: apt-get install valgrind): %w", err)
	}
	dir, err := os.MkdirTemp("", "nanobot-bench-cachegrind-")
	if err != nil {
		return instructionsResult{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var res instructionsResult
	for i, run := range []*instructionsRun{&res.Short, &res.Long} {
		run.Window = o.window * time.Duration(1+2*i)
		ro := o
		ro.window = run.Window
		cg := &cachegrind{valgrind: valgrind, out: filepath.Join(dir, fmt.Sprintf("run-%d.out", i))}
		ro.valgrind = cg
		r, err := drive(ctx, ro, setup{MaxConcurrentTurns: o.maxTurns}, 1, "instructions")
		if err != nil {
			return res, fmt.Errorf("%v window: %w", run.Window, err)
		}
		run.Turns = r.Turns
		if run.Instructions, err = cachegrindTotal(cg.out); err != nil {
			return res, err
		}
	}
	res.PerTurn, err = perTurn(res.Short, res.Long)
	return res, err
}

// perTurn is the instructions of a turn: what the long run executed beyond
// the short one, over the turns it did beyond it.
func perTurn(short, long instructionsRun) (float64, error) {
	if long.Turns <= short.Turns || long.Instructions <= short.Instructions {
		return 0, fmt.Errorf("the long run (%d turns, %d instructions) did not do more than the short one (%d turns, %d instructions)",
			long.Turns, long.Instructions, short.Turns, short.Instructions)
	}
	return float64(long.Instructions-short.Instructions) / float64(long.Turns-short.Turns), nil
}

// cachegrind is how the harness wraps the gateway in valgrind.
type cachegrind struct {
	valgrind string
	out      string // --cachegrind-out-file
}

// command returns the valgrind command line that runs bin with args.
func (c *cachegrind) command(bin string, args []string) (string, []string) {
	return c.valgrind, append([]string{"--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=" + c.out, bin}, args...)
}

// cachegrindTotal reads the instruction count from cachegrind's output file,
// its "summary:" line (Ir is the only event with the cache simulation off).
func cachegrindTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cachegrind output: %w", err)
	}
	defer func() { _ = f.Close() }()
	return parseCachegrindSummary(f)
}

func parseCachegrindSummary(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "summary:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cachegrind summary %q: %w", rest, err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cachegrind output: %w", err)
	}
	return 0, fmt.Errorf("cachegrind output has no summary line (did the gateway exit cleanly?)")
}
