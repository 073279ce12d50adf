package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// replyText is what the zero-latency model answers every turn: short, plain
// (its Telegram HTML is itself), streamed in the fake's default 8-byte chunks.
const replyText = "Noted, I will keep that in mind. Anything else you want me to look at today?"

// firstSender is the first generated Telegram user id; every message comes
// from a new user, so the per-sender rate limit (30 a minute) never applies
// and no safety bound has to be changed for the load to pass through.
const firstSender = 5_000_000_000

// chatID is the id of the i-th generated group chat (supergroup ids are
// negative, from -1001000000000).
func chatID(i int) int64 { return -1_001_000_000_000 - int64(i) }

// sessionKey is the gateway's session key for a generated chat.
func sessionKey(chat int64) string { return "telegram:" + strconv.FormatInt(chat, 10) }

// driver pushes turns through the gateway over the Telegram fake and
// measures each, taking the model fake's own time out.
type driver struct {
	h       *harness
	senders atomic.Int64
	// chats maps a chat id to its state; built before the gateway starts
	// and only read afterwards.
	chats map[int64]*chatState
	// reply decides the model's answer and may note when its first token
	// goes out; nil answers replyText at once.
	reply func(st *chatState) fakellm.Reply
	// think is how long each chat waits after a reply before it sends its
	// next message (a person reading); 0 is a closed loop at full speed.
	think time.Duration
	// api, when set, sends the turns through the OpenAI-compatible API
	// instead of Telegram.
	api *apiClient
}

// chatState is what the model fake learned about a chat's turn in flight
// (one at a time: each chat waits for its reply before sending again).
type chatState struct {
	id         int64
	model      atomic.Int64 // the fake's own time for the turn's model call, ns
	calls      atomic.Int64 // model calls seen for this chat
	reqBytes   atomic.Int64 // size of the last request body
	firstToken atomic.Int64 // unix ns when the first token was written, stream scenario
	// hold (a chan struct{}), in the stream scenario, holds the model's
	// stream after its first token until the turn's first message shows.
	hold atomic.Value
}

func newDriver(h *harness, chats int) *driver {
	d := &driver{h: h, chats: make(map[int64]*chatState, chats)}
	d.senders.Store(firstSender)
	for i := range chats {
		id := chatID(i)
		d.chats[id] = &chatState{id: id}
	}
	h.script.Func = d.answer
	return d
}

// answer is the model: it notes how long the fake took to read, decode and
// validate the request (the model's own time, subtracted from latency) and
// answers at once.
func (d *driver) answer(req fakellm.Request) fakellm.Reply {
	if req.ToolChoice == "save_memory" {
		// Memory consolidation: answered like a model would, so long
		// sessions are folded into memory and their turns stay cheap. It
		// is background work, not a chat's turn: not sampled.
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_mem", Name: "save_memory",
			Args: `{"history_entry":"[2026-01-01 00:00] The user ran a benchmark conversation.","memory_update":"# Memory\n- The user runs benchmarks."}`}}}
	}
	took := time.Since(req.Received)
	st := d.chats[parseChat(req.LastUserText())]
	if st == nil {
		return fakellm.Reply{Text: replyText}
	}
	st.model.Store(int64(took))
	st.calls.Add(1)
	st.reqBytes.Store(int64(len(req.Raw)))
	if d.reply != nil {
		return d.reply(st)
	}
	return fakellm.Reply{Text: replyText}
}

// parseChat finds the "bench:<chat>:<n>" tag the driver puts in every
// message it sends; 0 when absent.
func parseChat(text string) int64 {
	_, rest, ok := strings.Cut(text, "bench:")
	if !ok {
		return 0
	}
	id, _, _ := strings.Cut(rest, ":")
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}

// sample is one measured turn.
type sample struct {
	pushed, replied time.Time
	model           time.Duration
	calls           int64
	reqBytes        int64
}

// added is the latency the gateway added: update available to reply
// received, minus the model fake's own time.
func (s sample) added() time.Duration { return s.replied.Sub(s.pushed) - s.model }

// message is the n-th message of chat st, from a user never seen before.
func (d *driver) message(st *chatState, n int) models.Message {
	return models.Message{
		Chat: models.Chat{ID: st.id, Type: models.ChatTypeSupergroup, Title: "bench"},
		From: &models.User{ID: d.senders.Add(1), FirstName: "Bench"},
		Text: fmt.Sprintf("bench:%d:%d How are things going today? Tell me something short.", st.id, n),
	}
}

// turn sends one message to chat and waits for the reply.
func (d *driver) turn(ctx context.Context, st *chatState, n int, replies <-chan sent) (sample, error) {
	st.model.Store(0)
	st.calls.Store(0)
	msg := d.message(st, n)
	s := sample{pushed: time.Now()}
	d.h.tg.PushMessage(msg)
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case r := <-replies:
			if r.Text != replyText {
				if strings.HasPrefix(r.Text, "⚠️") {
					return s, fmt.Errorf("chat %d: the gateway answered with an error: %q", st.id, r.Text)
				}
				continue // a draft or a leftover of an earlier turn
			}
			s.replied = r.At
			s.model = time.Duration(st.model.Load())
			s.calls = st.calls.Load()
			s.reqBytes = st.reqBytes.Load()
			return s, nil
		case <-timeout.C:
			return s, fmt.Errorf("chat %d: no reply within 60s (log: %s)", st.id, d.h.logf.Name())
		case <-d.h.exited:
			return s, d.h.exitError()
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

// loadResult is one load run at a fixed number of chats.
type loadResult struct {
	Chats     int
	Turns     int           // completed in the measured window
	Window    time.Duration // length of the measured window
	TurnsPerS float64
	Added     latencies // added latency of turns inside the window
	EndToEnd  latencies // update available → reply, model time included
	Model     latencies // the model fake's own time
	// CPU is the gateway's CPU time in the window (all threads, user+system);
	// BenchCPU is this program's (fakes and load generator) in the same window.
	CPU, BenchCPU time.Duration
	RSS           memory // sampled every 100 ms in the window: median
	RSSMax        int64
	ReqBytes      int64 // median request body size sent to the model
	ModelCalls    int64 // model calls per turn (1 without tools; consolidation calls are not counted)
}

// CPUPerTurn is the gateway's CPU time per completed turn.
func (r loadResult) CPUPerTurn() time.Duration {
	if r.Turns == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Turns)
}

// run drives every chat in a closed loop (send, wait for the reply, wait
// think, send again) and measures a window of that length. The window opens
// once warmup has passed and every chat has had a reply: on a slow start
// (worker processes still starting, a loaded machine) a window opened by
// the clock alone would measure the start, or nothing at all.
func (d *driver) run(ctx context.Context, warmup, window time.Duration) (loadResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu      sync.Mutex
		samples []sample
		firstEr error
		wg      sync.WaitGroup
		// answered counts the chats that had a reply; warm closes when
		// all have, closed ends the chats' loops after the window.
		answered atomic.Int64
		warm     = make(chan struct{})
		closed   = make(chan struct{})
	)
	for _, st := range d.chats {
		turn := func(n int) (sample, error) { return d.api.turn(ctx, d, st, n) }
		if d.api == nil {
			replies := d.h.replies.listen(st.id)
			turn = func(n int) (sample, error) { return d.turn(ctx, st, n, replies) }
		}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-closed:
					return
				default:
				}
				s, err := turn(n)
				if err != nil {
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
				if n == 0 && answered.Add(1) == int64(len(d.chats)) {
					close(warm)
				}
				if d.think > 0 {
					select {
					case <-time.After(d.think):
					case <-ctx.Done():
						return
					}
				}
			}
		})
	}

	res := loadResult{Chats: len(d.chats), Window: window}
	from, to, rss, err := d.measure(ctx, warmup, warm, window, &res)
	close(closed)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if firstEr != nil {
		return res, firstEr
	}
	if err != nil {
		return res, err
	}
	var added, e2e, model []time.Duration
	var reqBytes []int64
	for _, s := range samples {
		if s.replied.Before(from) || s.replied.After(to) {
			continue
		}
		res.Turns++
		added = append(added, s.added())
		e2e = append(e2e, s.replied.Sub(s.pushed))
		model = append(model, s.model)
		reqBytes = append(reqBytes, s.reqBytes)
		res.ModelCalls = max(res.ModelCalls, s.calls)
	}
	res.TurnsPerS = float64(res.Turns) / window.Seconds()
	res.Added, res.EndToEnd, res.Model = summarise(added), summarise(e2e), summarise(model)
	res.ReqBytes = median(reqBytes)
	res.RSS = medianMemory(rss)
	for _, m := range rss {
		res.RSSMax = max(res.RSSMax, m.RSS)
	}
	return res, nil
}

// measure waits for warmup and warm, then reads the gateway's CPU time at
// both ends of a window of the given length and its memory every 100 ms in
// it and at its end; it returns the window.
func (d *driver) measure(ctx context.Context, warmup time.Duration, warm <-chan struct{}, window time.Duration, res *loadResult) (from, to time.Time, rss []memory, err error) {
	var m meter
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
		return from, to, nil, nil // a chat failed; its error is reported
	}
	select {
	case <-warm:
	case <-ctx.Done():
		return from, to, nil, nil
	}
	if err := m.begin(d.h.pid()); err != nil {
		return from, to, nil, err
	}
	from = time.Now()
	to = from.Add(window)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.NewTimer(window)
	defer end.Stop()
	for {
		select {
		case <-tick.C:
			mem, err := readMemory(d.h.pid())
			if err != nil {
				return from, to, rss, err
			}
			rss = append(rss, mem)
		case <-end.C:
			// One more sample at the end: a window the ticker never
			// fired in (this goroutine starved on a loaded machine)
			// still has a reading.
			mem, err := readMemory(d.h.pid())
			if err != nil {
				return from, to, rss, err
			}
			return from, to, append(rss, mem), m.end(d.h.pid(), res)
		case <-ctx.Done():
			return from, to, rss, nil
		}
	}
}

// meter reads the gateway's and this program's CPU time at both ends of the
// window.
type meter struct {
	cpu, self time.Duration
}

func (m *meter) begin(pid int) error {
	cpu, err := readCPU(pid)
	if err != nil {
		return err
	}
	m.cpu, m.self = cpu, selfCPU()
	return nil
}

func (m *meter) end(pid int, r *loadResult) error {
	cpu, err := readCPU(pid)
	if err != nil {
		return err
	}
	r.CPU, r.BenchCPU = cpu-m.cpu, selfCPU()-m.self
	return nil
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianMemory takes the median of each field over the samples.
func medianMemory(ms []memory) memory {
	var rss, anon, file, peak, threads []int64
	for _, m := range ms {
		rss, anon, file, peak = append(rss, m.RSS), append(anon, m.Anon), append(file, m.File), append(peak, m.Peak)
		threads = append(threads, int64(m.Threads))
	}
	return memory{RSS: median(rss), Anon: median(anon), File: median(file), Peak: median(peak), Threads: int(median(threads))}
}
