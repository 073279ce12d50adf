package channels

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// call is one platform call the fake channel received.
type call struct {
	op    string // send, edit, delete, typing
	chat  string
	id    string // message id (sent or edited)
	text  string
	plain bool
	reply string
	media int
	at    time.Time
}

// fakeChannel records calls. fail, when set, may return an error for a call
// before it takes effect; block, when set, is waited on by Send.
type fakeChannel struct {
	name  string
	clock clock.Clock

	mu      sync.Mutex
	calls   []call
	nextID  int
	texts   map[string]string // current text per message id
	fail    func(c call) error
	changed chan struct{}
}

func newFakeChannel(clk clock.Clock) *fakeChannel {
	return &fakeChannel{name: "fake", clock: clk, texts: map[string]string{}, changed: make(chan struct{}, 1)}
}

func (f *fakeChannel) Name() string                  { return f.name }
func (f *fakeChannel) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func (f *fakeChannel) record(c call) error {
	c.at = f.clock.Now()
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(c); err != nil {
			f.mu.Lock()
			f.calls = append(f.calls, call{op: c.op + "!", chat: c.chat, id: c.id, text: c.text, at: c.at})
			f.mu.Unlock()
			f.notify()
			return err
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	f.notify()
	return nil
}

func (f *fakeChannel) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeChannel) Send(ctx context.Context, m Outgoing) (Sent, error) {
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprint(f.nextID)
	f.mu.Unlock()
	if err := f.record(call{op: "send", chat: m.ChatID, id: id, text: m.Text, plain: m.Plain, reply: m.ReplyTo, media: len(m.Media)}); err != nil {
		return Sent{}, err
	}
	f.mu.Lock()
	f.texts[id] = m.Text
	f.mu.Unlock()
	return Sent{ChatID: m.ChatID, MessageID: id}, nil
}

func (f *fakeChannel) Edit(ctx context.Context, ref Sent, text string, plain bool) error {
	f.mu.Lock()
	same := f.texts[ref.MessageID] == text
	f.mu.Unlock()
	if err := f.record(call{op: "edit", chat: ref.ChatID, id: ref.MessageID, text: text, plain: plain}); err != nil {
		return err
	}
	if same {
		return ErrNotModified
	}
	f.mu.Lock()
	f.texts[ref.MessageID] = text
	f.mu.Unlock()
	return nil
}

func (f *fakeChannel) Delete(ctx context.Context, ref Sent) error {
	if err := f.record(call{op: "delete", chat: ref.ChatID, id: ref.MessageID}); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.texts, ref.MessageID)
	f.mu.Unlock()
	return nil
}

func (f *fakeChannel) Typing(ctx context.Context, chatID string, _ map[string]string) error {
	return f.record(call{op: "typing", chat: chatID})
}

func (f *fakeChannel) TypingInterval() time.Duration { return 4 * time.Second }

func (f *fakeChannel) setFail(fn func(c call) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

// ops returns the recorded calls, optionally only those of one op.
func (f *fakeChannel) ops(op string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if op == "" || c.op == op {
			out = append(out, c)
		}
	}
	return out
}

// visible returns the current texts of the live messages in send order.
func (f *fakeChannel) visible() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i := 1; i <= f.nextID; i++ {
		if t, ok := f.texts[fmt.Sprint(i)]; ok {
			out = append(out, t)
		}
	}
	return out
}

// waitCalls waits until at least n calls of op were recorded.
func (f *fakeChannel) waitCalls(t *testing.T, op string, n int) []call {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if got := f.ops(op); len(got) >= n {
			return got
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %d %q calls; have %+v", n, op, f.ops(""))
		}
	}
}

// testRenderer renders Markdown as "<md>" so tests can tell markup from
// plain text, splitting at limit runes.
type testRenderer struct{ limit int }

func (r testRenderer) RenderChunks(md string) []Chunk {
	var out []Chunk
	for _, p := range Split(md, r.limit-len("<>"), runeLen) {
		out = append(out, Chunk{Text: "<" + p + ">", Plain: p})
	}
	return out
}

func (r testRenderer) Render(md string) []string {
	var out []string
	for _, c := range r.RenderChunks(md) {
		out = append(out, c.Text)
	}
	return out
}

func (r testRenderer) RenderPlain(md string) []string { return Split(md, r.limit, runeLen) }

// harness runs a Manager over a fake channel with a fake clock.
type harness struct {
	t      *testing.T
	clock  *clock.Fake
	ch     *fakeChannel
	m      *Manager
	src    chan bus.OutboundMessage
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	handled map[string]int
	idleAt  map[string]time.Time // the time each chat's worker last acted on
	idle    chan struct{}
}

func newHarness(t *testing.T, out config.OutputConfig, cfg ManagerConfig) *harness {
	t.Helper()
	return newHarnessOn(t, out, cfg, nil)
}

// newHarnessOn is newHarness on the platform ch (nil: a new one), for a
// manager that takes over from another one, as after a restart.
func newHarnessOn(t *testing.T, out config.OutputConfig, cfg ManagerConfig, ch *fakeChannel) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock.NewFake(), src: make(chan bus.OutboundMessage), handled: map[string]int{},
		idleAt: map[string]time.Time{}, idle: make(chan struct{}, 1)}
	h.ch = ch
	if h.ch == nil {
		h.ch = newFakeChannel(h.clock)
	}
	cfg.Clock = h.clock
	h.m = NewManager(h.src, cfg, zaptest.NewLogger(t))
	h.m.idleHook = func(chat string, n int, at time.Time) {
		h.mu.Lock()
		h.handled[chat] = n
		h.idleAt[chat] = at
		h.mu.Unlock()
		select {
		case h.idle <- struct{}{}:
		default:
		}
	}
	if err := h.m.Register(h.ch, testRenderer{limit: 40}, out); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
		h.done <- nil
	case <-time.After(5 * time.Second):
		h.t.Error("manager did not stop")
	}
}

// send publishes msgs and waits until chat's worker has handled n messages
// in total and blocks.
func (h *harness) send(n int, msgs ...bus.OutboundMessage) {
	h.t.Helper()
	for _, m := range msgs {
		if m.Channel == "" {
			m.Channel = "fake"
		}
		if m.ChatID == "" {
			m.ChatID = "c1"
		}
		h.src <- m
	}
	h.waitIdle("c1", n)
}

func (h *harness) waitIdle(chat string, n int) {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		h.mu.Lock()
		got := h.handled[chat]
		h.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-h.idle:
		case <-deadline:
			h.t.Fatalf("worker for %s handled %d messages, want %d", chat, got, n)
		}
	}
}

// advance moves the fake clock; when that fires a timer, it waits until
// c1's worker has acted on the new time and blocks again. (An idle signal
// from before the move — a worker woken by a leftover mailbox signal
// reports idle twice — does not count.)
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	next, armed := h.clock.NextDeadline()
	h.clock.Advance(d)
	if !armed || next > d {
		return
	}
	target := h.clock.Now()
	deadline := time.After(5 * time.Second)
	for {
		h.mu.Lock()
		at := h.idleAt["c1"]
		h.mu.Unlock()
		if !at.Before(target) {
			return
		}
		select {
		case <-h.idle:
		case <-deadline:
			h.t.Fatalf("worker did not act on the time after advancing %s", d)
		}
	}
}

func texts(cs []call) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.text)
	}
	return out
}

func joinVisible(v []string) string { return strings.Join(v, "|") }
