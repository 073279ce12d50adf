package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// options are the command line's settings for every scenario.
type options struct {
	bin        string
	runs       int
	chats      []int
	apiClients []int
	warmup     time.Duration
	window     time.Duration
	prior      []int
	histChats  int
	histTurns  int
	settle     time.Duration
	workingSet time.Duration
	streamN    int
	maxTurns   int
	memWindow  int
	backlog    bool // history: seed the sessions unconsolidated
	think      time.Duration
	keep       bool
	pprofAddr  string
	profileDir string
	readyLimit time.Duration
	pin        *pinning // -pin: gateway and bench on a CPU each
	godebug    string
	webTurns   int
	webClients int
	// webClientTurns is how many turns each client of the web concurrency
	// phases runs.
	webClientTurns int
	workers        []int
	scaleChats     int
	modelDelay     time.Duration
	// scaleSessions is bus.nats.sessions of the scale scenario's workers.
	scaleSessions string
	// valgrind, when set, runs the gateway under valgrind (the
	// instructions scenario).
	valgrind valgrindTool
	// probes are the init scenario's programs, built once for every run.
	probes []builtProbe
}

// withGateway prepares a harness, starts the gateway and waits until it is
// ready; fn runs on the ready gateway, which is then stopped.
func withGateway(ctx context.Context, o options, s setup, fn func(h *harness, r ready) error) error {
	h, err := newHarness(o.bin, s, o.keep)
	if err != nil {
		return err
	}
	defer h.Close()
	h.pin, h.godebug, h.valgrind = o.pin, o.godebug, o.valgrind
	if err := h.start(o.pprofAddr); err != nil {
		return err
	}
	r, err := h.awaitReady(ctx, o.readyLimit)
	if err != nil {
		return err
	}
	if err := fn(h, r); err != nil {
		return err
	}
	return h.stop(30 * time.Second)
}

// idleResult is one run of the gateway with Telegram and Discord enabled:
// a first start, which installs the workspace template, and a restart on
// that workspace, which is the start a daemon does every other time.
type idleResult struct {
	First ready
	Ready ready
	// AllReady is when both channels were connected (Discord READY seen).
	AllReady time.Duration
	Memory   memory
	// WorkingSet is the largest RSS over a stretch of idling after the
	// binary's pages were paged out (see idleWorkingSet); zero if not
	// measured.
	WorkingSet memory
	// WorkingSetErr says why WorkingSet was not measured.
	WorkingSetErr string `json:",omitempty"`
}

// runIdle starts the gateway with both channels, stops it and starts it
// again, notes when each was ready, lets the second settle and reads its
// memory ten times, 100 ms apart. With -profile it then saves the idle heap
// profile, goroutines and smaps (the last run's).
func runIdle(ctx context.Context, o options) (idleResult, error) {
	var res idleResult
	err := withGateway(ctx, o, setup{Discord: true}, func(h *harness, r ready) error {
		res.First = r
		if err := h.stop(30 * time.Second); err != nil {
			return err
		}
		if err := h.start(o.pprofAddr); err != nil {
			return err
		}
		r, err := h.awaitReady(ctx, o.readyLimit)
		if err != nil {
			return err
		}
		res.Ready, res.AllReady = r, time.Since(h.started)
		select {
		case <-time.After(o.settle):
		case <-ctx.Done():
			return ctx.Err()
		}
		var ms []memory
		for range 10 {
			m, err := readMemory(h.pid())
			if err != nil {
				return err
			}
			ms = append(ms, m)
			time.Sleep(100 * time.Millisecond)
		}
		res.Memory = medianMemory(ms)
		if o.profileDir != "" {
			if err := saveIdleProfiles(ctx, h, profiler{addr: o.pprofAddr, dir: o.profileDir}); err != nil {
				return err
			}
		}
		if o.workingSet <= 0 {
			return nil
		}
		ws, err := idleWorkingSet(ctx, h.pid(), o.workingSet)
		switch {
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
			// Not allowed (no CAP_SYS_NICE) or an old kernel: the figure is
			// missing from the report, not made up.
			res.WorkingSetErr = err.Error()
		case err != nil:
			return err
		default:
			res.WorkingSet = ws
		}
		return nil
	})
	return res, err
}

// saveIdleProfiles saves what the idle gateway's anonymous memory is: which
// mappings hold it (smaps, read first: fetching the profiles allocates), the
// heap profile, the runtime's own accounting (heap?debug=1 ends with
// MemStats) and the goroutines. The heap profile samples one allocation per
// 512 KiB unless the gateway runs with -godebug memprofilerate=1.
func saveIdleProfiles(ctx context.Context, h *harness, p profiler) error {
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", h.pid()))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.dir, "idle-smaps.txt"), smaps, 0o644); err != nil {
		return err
	}
	for _, f := range []struct{ path, file string }{
		{"heap?gc=1", "idle-heap.pprof"}, // a GC first, so the profile covers every allocation up to now
		{"heap?debug=1", "idle-heap.txt"},
		{"goroutine?debug=1", "idle-goroutine.txt"},
	} {
		if err := p.fetch(ctx, f.path, f.file); err != nil {
			return err
		}
	}
	return nil
}

// runLoad runs the closed-loop load at one number of chats.
func runLoad(ctx context.Context, o options, chats int) (loadResult, error) {
	return drive(ctx, o, setup{MaxConcurrentTurns: o.maxTurns}, chats, fmt.Sprintf("load-%d", chats))
}

// scaleResult is one run of the scale-out load: Workers agent processes
// behind one channels process over NATS; 0 is the single process with the
// in-process bus, for comparison.
type scaleResult struct {
	Workers int
	loadResult
}

// scaleTurns is agents.max_concurrent_turns (and max_group_turns: the
// generated chats are groups) in every process of the scale scenario, so a
// process serves this many turns at once and the workers are the variable.
const scaleTurns = 4

// runScale drives o.scaleChats chats in a closed loop against a model that
// takes o.modelDelay, with workers agent processes (0: one process).
func runScale(ctx context.Context, o options, workers int) (loadResult, error) {
	s := setup{Workers: workers, Sessions: o.scaleSessions, MaxConcurrentTurns: scaleTurns, MaxGroupTurns: scaleTurns}
	var res loadResult
	err := withGateway(ctx, o, s, func(h *harness, _ ready) error {
		d := newDriver(h, o.scaleChats)
		d.reply = func(*chatState) fakellm.Reply { return fakellm.Reply{Text: replyText, Delay: o.modelDelay} }
		var err error
		res, err = d.run(ctx, o.warmup, o.window)
		return err
	})
	return res, err
}

// historyResult is the per-turn cost with sessions of Prior messages.
type historyResult struct {
	Prior int
	// Backlog: the sessions were seeded unconsolidated, so their first
	// turns set off folding the whole backlog in the background.
	Backlog bool
	// First is the first turn of each chat after the start: it reads the
	// session file.
	First latencies
	// Added, CPU and ReqBytes are of the later turns, the session loaded.
	Turns    int
	Added    latencies
	Model    latencies
	CPU      time.Duration
	ReqBytes int64
}

// CPUPerTurn is the gateway's CPU time per turn once the session is loaded.
func (r historyResult) CPUPerTurn() time.Duration {
	if r.Turns == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Turns)
}

// runHistory measures turns in chats whose sessions already hold prior
// messages, one turn at a time so nothing queues: first every chat's first
// turn (which loads its session), then o.histTurns more turns in each,
// metered. Each chat does only a few turns, so its session stays at about
// prior messages.
func runHistory(ctx context.Context, o options, prior int) (historyResult, error) {
	res := historyResult{Prior: prior, Backlog: o.backlog}
	tail := prior
	if !o.backlog {
		tail = steadyTail(prior, o.memWindow)
	}
	s := setup{MaxConcurrentTurns: o.maxTurns, MemoryWindow: o.memWindow, Seed: seedSessions(o.histChats, prior, tail)}
	err := withGateway(ctx, o, s, func(h *harness, _ ready) error {
		d := newDriver(h, o.histChats)
		var first, added, model []time.Duration
		var reqBytes []int64
		sequence := func(n int, out *[]time.Duration) error {
			for i := range o.histChats {
				st := d.chats[chatID(i)]
				replies := h.replies.listen(st.id)
				for k := range n {
					smp, err := d.turn(ctx, st, k, replies)
					if err != nil {
						return err
					}
					*out = append(*out, smp.added())
					if out == &added {
						model = append(model, smp.model)
						reqBytes = append(reqBytes, smp.reqBytes)
					}
				}
			}
			return nil
		}
		if err := sequence(1, &first); err != nil {
			return err
		}
		var m meter
		if err := m.begin(h.pid()); err != nil {
			return err
		}
		if err := sequence(o.histTurns, &added); err != nil {
			return err
		}
		var lr loadResult
		if err := m.end(h.pid(), &lr); err != nil {
			return err
		}
		res.First, res.Added, res.Model = summarise(first), summarise(added), summarise(model)
		res.Turns, res.CPU, res.ReqBytes = len(added), lr.CPU, median(reqBytes)
		return nil
	})
	return res, err
}

// drive runs the load on a fresh gateway, profiling its window when asked.
func drive(ctx context.Context, o options, s setup, chats int, name string) (loadResult, error) {
	var res loadResult
	err := withGateway(ctx, o, s, func(h *harness, _ ready) error {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		profiled := make(chan error, 1)
		if o.profileDir != "" {
			// The window opens at the warm-up's end unless a chat is
			// still waiting for its first reply then (a slow start): the
			// profile may then begin before the window.
			from := time.Now().Add(o.warmup)
			go func() { profiled <- profiler{addr: o.pprofAddr, dir: o.profileDir}.capture(pctx, name, from, o.window) }()
		} else {
			profiled <- nil
		}
		var err error
		d := newDriver(h, chats)
		d.think = o.think
		res, err = d.run(ctx, o.warmup, o.window)
		if err != nil {
			cancel()       // the profiler stops; wait for it before the gateway goes
			_ = <-profiled // the run's error is the one to report
			return err
		}
		return <-profiled
	})
	return res, err
}

// streamText is the streamed reply: 30 chunks of 8 bytes.
var streamText = strings.TrimSpace(strings.Repeat("stream! ", 30))

// streamChunkDelay separates the streamed chunks once the first message is
// shown (until then the stream is held after its first token, so the first
// message shows the first token rather than the end of the stream however
// slow the machine).
const streamChunkDelay = 20 * time.Millisecond

// runStream measures, with streaming on, the time from the model writing
// its first token to the first message the user sees, over o.streamN turns
// in one chat.
func runStream(ctx context.Context, o options) ([]time.Duration, error) {
	var out []time.Duration
	err := withGateway(ctx, o, setup{Streaming: true}, func(h *harness, _ ready) error {
		d := newDriver(h, 1)
		d.reply = func(st *chatState) fakellm.Reply {
			st.firstToken.Store(time.Now().UnixNano())
			hold, _ := st.hold.Load().(chan struct{})
			return fakellm.Reply{Text: streamText, ChunkDelay: streamChunkDelay, HoldAfterFirst: hold}
		}
		st := d.chats[chatID(0)]
		replies := h.replies.listen(st.id)
		for n := range o.streamN {
			first, err := d.streamTurn(ctx, st, n, replies)
			if err != nil {
				return err
			}
			out = append(out, first)
		}
		return nil
	})
	return out, err
}

// streamTurn sends one message and returns the time from the first token
// to the first message shown; it returns once the whole reply is shown.
// The model's stream is held after its first token until that first
// message shows, so the message cannot wait for the end of the stream.
func (d *driver) streamTurn(ctx context.Context, st *chatState, n int, replies <-chan sent) (time.Duration, error) {
	st.firstToken.Store(0)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	st.hold.Store(hold)
	d.h.tg.PushMessage(d.message(st, n))
	var first time.Duration
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case r := <-replies:
			if first == 0 && !r.Edit {
				ft := st.firstToken.Load()
				if ft == 0 {
					return 0, fmt.Errorf("chat %d: a message was shown before the model answered: %q", st.id, r.Text)
				}
				first = r.At.Sub(time.Unix(0, ft))
				release()
			}
			if r.Text == streamText {
				if first == 0 {
					return 0, fmt.Errorf("chat %d: the whole reply was shown without a draft", st.id)
				}
				return first, nil
			}
		case <-timeout.C:
			if first == 0 {
				return 0, fmt.Errorf("chat %d: no draft shown within 60s of the first token (log: %s)", st.id, d.h.logf.Name())
			}
			return 0, fmt.Errorf("chat %d: reply not complete within 60s (log: %s)", st.id, d.h.logf.Name())
		case <-d.h.exited:
			return 0, d.h.exitError()
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
