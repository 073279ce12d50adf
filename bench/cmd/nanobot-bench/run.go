package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

var scenarios = []string{"idle", "load", "history", "stream", "api", "web", "scale"}

// onDemand are scenarios run only when named: instructions needs valgrind
// and runs the gateway some thirty times slower; init builds four programs
// of its own.
var onDemand = []string{"instructions", "init"}

// goBuild is how the bench builds a program: go build's flags and what it
// adds to the environment.
type goBuild struct {
	flags []string
	env   []string
}

// release is the release binary's build: CGO off (the static binary the
// README promises, with no libc mapped), paths trimmed, symbols stripped.
var release = goBuild{flags: []string{"-trimpath", "-ldflags=-s -w"}, env: []string{"CGO_ENABLED=0"}}

// command is `go <verb> <flags> args...` run in dir with b's environment.
func (b goBuild) command(ctx context.Context, dir, verb string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", slices.Concat([]string{verb}, b.flags, args)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), b.env...)
	return cmd
}

// describe is the command as progress lines show it.
func describe(cmd *exec.Cmd, env []string) string {
	return strings.TrimSpace(strings.Join(env, " ") + " " + strings.Join(cmd.Args, " "))
}

// run parses the command line, builds the binary when none is given, and
// runs the chosen scenarios, printing the report to stdout and progress to
// stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nanobot-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var which, chats, prior, apiClients, jsonPath, workers string
	fs.StringVar(&which, "scenario", strings.Join(scenarios, ","), "scenarios to run: "+strings.Join(scenarios, ", ")+"; and, only when named, instructions (one chat under valgrind's cachegrind: instructions per turn, from a -window run and one three times as long) and init (memory before main runs: the Go runtime alone, the fixed libraries, every library nanobot imports, and nanobot, each stopped in its last package initialiser)")
	fs.StringVar(&o.bin, "nanobot", "", "nanobot binary to measure [built from ./cmd/nanobot, stripped]")
	fs.IntVar(&o.runs, "runs", 5, "runs of each scenario; the report gives their median")
	fs.StringVar(&chats, "chats", "1,100,1000", "load: concurrent chats, one load run per value")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load, api and scale: time driven before measuring (longer if a chat has had no reply yet)")
	fs.DurationVar(&o.window, "window", 10*time.Second, "load and history: measured time")
	fs.StringVar(&apiClients, "api-clients", "1,100", "api: concurrent API clients (each its own session), one run per value")
	fs.StringVar(&prior, "prior", "10,10000", "history: prior messages in each session, one run per value")
	fs.IntVar(&o.histChats, "history-chats", 20, "history: chats, each with its own seeded session")
	fs.IntVar(&o.histTurns, "history-turns", 5, "history: measured turns in each chat after its first")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "idle: wait after ready before reading memory")
	fs.DurationVar(&o.workingSet, "working-set", 45*time.Second, "idle: after reading memory, page the binary out and watch the RSS this long (covers a 30 s long poll and a 41 s Discord heartbeat); 0 skips it")
	fs.IntVar(&o.streamN, "stream-turns", 10, "stream: turns per run")
	fs.IntVar(&o.maxTurns, "max-concurrent-turns", 0, "agents.max_concurrent_turns for load and history [the config default]")
	fs.IntVar(&o.memWindow, "memory-window", 0, "history: agents.memory_window [the config default, 100]")
	fs.BoolVar(&o.backlog, "history-backlog", false, "history: seed the sessions unconsolidated (an imported session, or one whose folding kept failing), so that the measured turns run beside the background folding of the whole backlog; by default all but the last few messages are consolidated, as the daemon leaves a long session")
	fs.DurationVar(&o.think, "think", 0, "load and api: each chat's pause between a reply and its next message (0: closed loop at full speed)")
	fs.IntVar(&o.webTurns, "web-turns", 50, "web: turns of each fan-out phase (one client, then -web-clients more) and of the lone client's concurrency phase")
	fs.IntVar(&o.webClients, "web-clients", 100, "web: browser-like clients streaming the conversation in the second fan-out phase, and chatting at once in the second concurrency phase")
	fs.IntVar(&o.webClientTurns, "web-client-turns", 10, "web: turns each of the -web-clients runs in the second concurrency phase (the lone client of the first runs -web-turns)")
	fs.StringVar(&workers, "workers", "1,2,4", "scale: agent worker processes over NATS, one run per value (plus one single-process run)")
	fs.IntVar(&o.scaleChats, "scale-chats", 32, "scale: concurrent chats")
	fs.StringVar(&o.scaleSessions, "scale-sessions", "", "scale: bus.nats.sessions of the workers, shared-volume or jetstream [the config default]")
	fs.DurationVar(&o.modelDelay, "model-delay", 500*time.Millisecond, "scale: how long the model takes to answer")
	fs.StringVar(&jsonPath, "json", "", "also write every run's raw results to this file")
	fs.StringVar(&o.profileDir, "profile", "", "write CPU, allocation, block, mutex and heap profiles of each load window, and an execution trace of its first 2 s, to this directory, and the idle gateway's heap profile, goroutines and smaps (builds the binary with -tags nanobot_pprof)")
	fs.StringVar(&o.godebug, "godebug", "", "GODEBUG of the gateway, e.g. memprofilerate=1 with -profile, or gctrace=1,inittrace=1 (its output goes to gateway.log, see -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep each run's directory (config, workspace, gateway.log)")
	var pin, floor bool
	fs.BoolVar(&floor, "floor", false, "measure cmd/nanobot-floor instead of nanobot: the least a turn needs, with the same libraries (docs/BENCHMARKS.md, The floor); load (the default) and instructions only")
	fs.BoolVar(&pin, "pin", false, "pin the gateway to CPU 0 (it then runs with GOMAXPROCS 1) and the bench — fakes and load generator — to CPU 1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.readyLimit = 30 * time.Second
	var err error
	if o.chats, err = intList(chats); err != nil {
		return fmt.Errorf("-chats: %w", err)
	}
	if o.prior, err = intList(prior); err != nil {
		return fmt.Errorf("-prior: %w", err)
	}
	if o.apiClients, err = intList(apiClients); err != nil {
		return fmt.Errorf("-api-clients: %w", err)
	}
	if o.workers, err = intList(workers); err != nil {
		return fmt.Errorf("-workers: %w", err)
	}
	chosen := strings.Split(which, ",")
	for _, s := range chosen {
		if !slices.Contains(scenarios, s) && !slices.Contains(onDemand, s) {
			return fmt.Errorf("-scenario: unknown %q (have %s)", s, strings.Join(append(slices.Clone(scenarios), onDemand...), ", "))
		}
	}
	if floor {
		named := false
		fs.Visit(func(f *flag.Flag) { named = named || f.Name == "scenario" })
		if !named {
			chosen = []string{"load"}
		}
		if o.bin != "" {
			return errors.New("-floor builds its binary; it does not go with -nanobot")
		}
		for _, s := range chosen {
			if !slices.Contains(floorScenarios, s) {
				return fmt.Errorf("-floor: scenario %s needs nanobot (the floor runs %s)", s, strings.Join(floorScenarios, ", "))
			}
		}
	}
	if o.runs < 1 || o.histChats < 1 || o.histTurns < 1 || o.streamN < 1 || o.webTurns < 1 || o.webClientTurns < 1 || o.webClients < 1 {
		return errors.New("-runs, -history-chats, -history-turns, -stream-turns, -web-turns, -web-client-turns and -web-clients must be at least 1")
	}

	if pin {
		if runtime.NumCPU() < 2 {
			return errors.New("-pin needs two CPUs")
		}
		o.pin = &pinning{gateway: 0, bench: 1}
		if err := o.pin.pinBench(); err != nil {
			return err
		}
	}
	rep := report{Started: time.Now(), Machine: describeMachine(), Options: o.describe()}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
		if o.pprofAddr, err = freeAddr(); err != nil {
			return err
		}
	}
	if o.bin == "" {
		dir, err := os.MkdirTemp("", "nanobot-bench-bin-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		o.bin = filepath.Join(dir, "nanobot")
		args := []string{"-o", o.bin}
		if o.profileDir != "" {
			args = append(args, "-tags", "nanobot_pprof")
		}
		pkg, dir, err := target(ctx, floor)
		if err != nil {
			return err
		}
		build := release.command(ctx, dir, "build", append(args, pkg)...)
		fmt.Fprintf(stderr, "building in %s: %s\n", dir, describe(build, release.env))
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build %s in %s: %w", pkg, dir, err)
		}
	}
	fi, err := os.Stat(o.bin)
	if err != nil {
		return fmt.Errorf("nanobot binary: %w", err)
	}
	rep.BinaryBytes = fi.Size()

	progress := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	if slices.Contains(chosen, "init") {
		dir, err := os.MkdirTemp("", "nanobot-bench-probes-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if o.probes, err = buildProbes(ctx, dir, release, progress); err != nil {
			return err
		}
	}
	for _, s := range chosen {
		for i := range o.runs {
			if err := rep.runOne(ctx, o, s, i, progress); err != nil {
				return fmt.Errorf("%s run %d: %w", s, i+1, err)
			}
		}
	}
	rep.Finished = time.Now()
	if jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	rep.print(stdout)
	return nil
}

// runOne runs one repetition of scenario s and records it.
func (rep *report) runOne(ctx context.Context, o options, s string, i int, progress func(string, ...any)) error {
	switch s {
	case "idle":
		r, err := runIdle(ctx, o)
		if err != nil {
			return err
		}
		progress("idle %d/%d: healthz %v, first getUpdates %v, both channels %v, RSS %.1f MiB",
			i+1, o.runs, r.Ready.Healthz.Round(time.Microsecond), r.Ready.FirstPoll.Round(time.Microsecond),
			r.AllReady.Round(time.Microsecond), mib(r.Memory.RSS))
		rep.Idle = append(rep.Idle, r)
	case "load":
		for _, c := range o.chats {
			r, err := runLoad(ctx, o, c)
			if err != nil {
				return fmt.Errorf("%d chats: %w", c, err)
			}
			progress("load %d/%d, %d chats: %.0f turns/s, added p50 %v p99 %v, CPU %v/turn",
				i+1, o.runs, c, r.TurnsPerS, r.Added.P50, r.Added.P99, r.CPUPerTurn())
			rep.Load = append(rep.Load, r)
		}
	case "history":
		for _, p := range o.prior {
			r, err := runHistory(ctx, o, p)
			if err != nil {
				return fmt.Errorf("%d prior messages: %w", p, err)
			}
			progress("history %d/%d, %d prior: first turn %v, later added p50 %v, CPU %v/turn, request %d bytes",
				i+1, o.runs, p, r.First.P50, r.Added.P50, r.CPUPerTurn(), r.ReqBytes)
			rep.History = append(rep.History, r)
		}
	case "api":
		for _, c := range o.apiClients {
			r, err := runAPI(ctx, o, c)
			if err != nil {
				return fmt.Errorf("%d clients: %w", c, err)
			}
			progress("api %d/%d, %d clients: %.0f turns/s, added p50 %v p99 %v, CPU %v/turn",
				i+1, o.runs, c, r.TurnsPerS, r.Added.P50, r.Added.P99, r.CPUPerTurn())
			rep.API = append(rep.API, r)
		}
	case "scale":
		for _, w := range append([]int{0}, o.workers...) {
			r, err := runScale(ctx, o, w)
			if err != nil {
				return fmt.Errorf("%d workers: %w", w, err)
			}
			progress("scale %d/%d, %d workers: %.1f turns/s, end to end p50 %v p99 %v",
				i+1, o.runs, w, r.TurnsPerS, r.EndToEnd.P50, r.EndToEnd.P99)
			rep.Scale = append(rep.Scale, scaleResult{Workers: w, loadResult: r})
		}
	case "init":
		// The first run also traces, when valgrind is installed.
		valgrind, err := exec.LookPath("valgrind")
		trace := err == nil && i == 0
		for _, p := range o.probes {
			r, err := measureProbe(ctx, p)
			if err != nil {
				return err
			}
			progress("init %d/%d, %s: %.1f MB binary, RSS %.1f MiB (%.1f anonymous, %.1f file-backed)",
				i+1, o.runs, r.Probe, float64(r.Binary)/1e6, mib(r.Memory.RSS), mib(r.Memory.Anon), mib(r.Memory.File))
			if trace {
				if r.Touched, err = traceProbe(ctx, valgrind, p); err != nil {
					return err
				}
				progress("init, %s under valgrind's lackey: read %.2f MiB of code and %.2f MiB of read-only data before main, in %d windows of 64 KiB",
					r.Probe, mib(r.Touched.Code), mib(r.Touched.ReadOnly), r.Touched.Windows)
			}
			rep.Init = append(rep.Init, r)
		}
		if trace {
			if rep.IdleTouched, err = traceIdleGateway(ctx, o, valgrind); err != nil {
				return err
			}
			progress("init, the idle gateway under valgrind's lackey: read %.2f MiB of code and %.2f MiB of read-only data from exec to %v after ready, in %d windows of 64 KiB",
				mib(rep.IdleTouched.Code), mib(rep.IdleTouched.ReadOnly), o.settle, rep.IdleTouched.Windows)
		}
		if rep.FaultAround == 0 && len(o.probes) > 0 {
			if rep.FaultAround, err = faultAround(o.probes[len(o.probes)-1].bin); err != nil {
				return fmt.Errorf("measure fault-around: %w", err)
			}
		}
	case "instructions":
		r, err := runInstructions(ctx, o)
		if err != nil {
			return err
		}
		progress("instructions %d/%d: %.2f M a turn (%d turns, %d M in %v; %d turns, %d M in %v)", i+1, o.runs, r.PerTurn/1e6,
			r.Short.Turns, r.Short.Instructions/1e6, r.Short.Window, r.Long.Turns, r.Long.Instructions/1e6, r.Long.Window)
		rep.Instructions = append(rep.Instructions, r)
	case "stream":
		firsts, err := runStream(ctx, o)
		if err != nil {
			return err
		}
		l := summarise(firsts)
		progress("stream %d/%d: first token → first message p50 %v max %v", i+1, o.runs, l.P50, l.Max)
		rep.Stream = append(rep.Stream, l)
	case "web":
		r, err := runWeb(ctx, o)
		if err != nil {
			return err
		}
		progress("web %d/%d: first draft visible p50 %v max %v; CPU/turn %v alone, %v with %d clients watching; %v one client chatting, %v with %d at once (%d turns); page %d B gzip",
			i+1, o.runs, r.FirstVisible.P50, r.FirstVisible.Max, r.CPUAlone, r.CPUWatched, r.Clients, r.CPUOne, r.CPUMany, r.Clients, r.ManyTurns, r.PageGzip)
		rep.Web = append(rep.Web, r)
	}
	return nil
}

// floorScenarios are those the floor can serve: it answers Telegram
// messages and /healthz, nothing else.
var floorScenarios = []string{"load", "instructions"}

// target is the package the bench builds and the directory to build it in:
// nanobot in the product module (its own go.mod, as the Dockerfile builds
// it), the floor in the bench module, the current one.
func target(ctx context.Context, floor bool) (pkg, dir string, err error) {
	if floor {
		return "./cmd/nanobot-floor", "", nil
	}
	dir, err = productDir(ctx)
	return "./cmd/nanobot", dir, err
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (o options) describe() string {
	return fmt.Sprintf("runs=%d chats=%v api-clients=%v warmup=%v window=%v prior=%v history-chats=%d history-turns=%d settle=%v working-set=%v stream-turns=%d max-concurrent-turns=%d memory-window=%d history-backlog=%v think=%v pin=%v web-turns=%d web-clients=%d web-client-turns=%d workers=%v scale-chats=%d model-delay=%v scale-sessions=%q godebug=%q",
		o.runs, o.chats, o.apiClients, o.warmup, o.window, o.prior, o.histChats, o.histTurns, o.settle, o.workingSet, o.streamN, o.maxTurns, o.memWindow, o.backlog, o.think, o.pin != nil, o.webTurns, o.webClients, o.webClientTurns,
		o.workers, o.scaleChats, o.modelDelay, o.scaleSessions, o.godebug)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
