package channels

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// ManagerConfig bounds the outbound machinery. Zero fields take the defaults
// in brackets.
type ManagerConfig struct {
	// MaxChats caps running per-chat workers [1024]. Past it, a new chat's
	// messages are parked in its own mailbox, the least recently active
	// idle worker is retired at once, and the parked chat gets its place
	// (oldest parked first). Dispatch never waits for a place, so one
	// chat's wait holds up no other chat.
	MaxChats int
	// ChatQueue is how many messages may wait for one chat before dispatch
	// waits for that chat [256]. Drafts coalesce and do not pile up.
	ChatQueue int
	// IdleTimeout reaps a chat's worker after this long without work [1m].
	IdleTimeout time.Duration
	// TypingCap stops a typing indicator whose turn never ended, and forgets
	// that turn [5m].
	TypingCap time.Duration
	// DrainTimeout bounds delivery of what is queued once Run's context
	// ends [10s].
	DrainTimeout time.Duration
	// CallTimeout bounds one platform call [30s].
	CallTimeout time.Duration
	Retry       RetryPolicy
	// Clock is the time source [clock.System].
	Clock clock.Clock
	// Observer is told the outcome of every platform call [nothing is].
	Observer Observer
	// Drafts keeps which platform messages show each turn's streamed
	// draft beyond this process [nothing does: a process that restarts
	// mid-turn sends the answer as new messages].
	Drafts DraftRecord
}

// DraftRecord keeps, beyond the process, which platform messages show a
// turn's streamed draft. A channels process of a scaled-out deployment
// (docs/scale-out.md) that is killed after a draft went out and restarted
// gets the turn's later drafts and its final again from the outbound
// stream; with the record it edits them into the messages already on
// screen, as it would have, instead of sending the answer a second time
// beside its draft. Edits repeat harmlessly, so a final delivered again
// after a crash that came before its acknowledgement is not shown twice
// either.
//
// The worker calls Remember each time a turn's draft starts a new platform
// message (or drops its messages: refs empty), and Recall when a draft or
// final arrives for a turn it has not seen. Calls come from many chat
// workers at once and block only their chat.
type DraftRecord interface {
	Remember(ctx context.Context, channel, turn string, refs []Sent) error
	Recall(ctx context.Context, channel, turn string) ([]Sent, error)
}

// Observer is told the outcome of each platform call the manager makes
// (each attempt, retries included), for metrics. Op is send, edit, delete,
// send media or typing; outcome is ok or one of the error kinds:
// not_modified, bad_markup, rate_limited, unknown_outcome, permanent,
// canceled, transient. It must be cheap and safe for concurrent use.
//
// Reply is told what became of each outbound message (one call per
// message, all its chunks and attachments together): ReplyDelivered,
// ReplyFailed or ReplyCut. Set against the agent's answered turns it tells
// an answer that reached the chat from one the agent merely produced.
type Observer interface {
	PlatformCall(channel, op, outcome string)
	Reply(channel, kind, outcome string)
}

// Outcomes of an outbound message, for Observer.Reply.
const (
	// ReplyDelivered: handed to the platform (or to the page or API) whole.
	ReplyDelivered = "delivered"
	// ReplyFailed: given up on for good (refused, retries exhausted, an
	// unknown channel); some of its parts may have gone out.
	ReplyFailed = "failed"
	// ReplyCut: shutdown cut its delivery short; it is not acknowledged,
	// so a channel that redelivers brings its question back.
	ReplyCut = "cut"
)

type nopObserver struct{}

func (nopObserver) PlatformCall(string, string, string) {}
func (nopObserver) Reply(string, string, string)        {}

// reply reports msg's outcome to the Observer; drafts, statuses and turn
// starts are best effort and not counted.
func (m *Manager) reply(channel string, msg bus.OutboundMessage, outcome string) {
	if msg.Kind == bus.KindFinal || msg.Kind == bus.KindMessage {
		m.cfg.Observer.Reply(channel, msg.Kind.String(), outcome)
	}
}

// RetryPolicy bounds the retries of one platform call.
type RetryPolicy struct {
	// MaxAttempts counts every try, the first included [5].
	MaxAttempts int
	// MaxWait caps the total time spent waiting between tries [2m].
	MaxWait time.Duration
	// BaseBackoff is the first wait after a transient error [500ms]; it
	// doubles per try up to MaxBackoff [15s].
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

func (c ManagerConfig) withDefaults() ManagerConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxChats, 1024)
	def(&c.ChatQueue, 256)
	defD(&c.IdleTimeout, time.Minute)
	defD(&c.TypingCap, 5*time.Minute)
	defD(&c.DrainTimeout, 10*time.Second)
	defD(&c.CallTimeout, 30*time.Second)
	def(&c.Retry.MaxAttempts, 5)
	defD(&c.Retry.MaxWait, 2*time.Minute)
	defD(&c.Retry.BaseBackoff, 500*time.Millisecond)
	defD(&c.Retry.MaxBackoff, 15*time.Second)
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// Manager delivers the agent's outbound messages to the channels
// (docs/channels.md#outbound-manager). It routes each message by its Channel
// name, delivers one chat's messages in order on that chat's worker and
// different chats in parallel, streams drafts by editing, shows typing,
// renders, chunks and retries.
type Manager struct {
	src   <-chan bus.OutboundMessage
	cfg   ManagerConfig
	log   *zap.Logger
	clock clock.Clock

	routes    map[string]*route
	receivers map[string]Receiver

	mu      sync.Mutex
	workers map[chatKey]*worker // running and parked
	running int                 // workers whose goroutine runs, at most MaxChats
	parked  list.List           // of *worker waiting for a place, oldest first
	idle    list.List           // of running *worker waiting idle, least recently active first
	wg      sync.WaitGroup      // one per worker, parked ones included

	// closing is closed when intake stops; workers then finish their queue
	// and exit. workCtx bounds every platform call and ends DrainTimeout
	// after Run's context.
	closing    chan struct{}
	workCtx    context.Context
	cancelWork context.CancelFunc

	// idleHook, set only by tests, is called by a worker right before it
	// blocks, with how many messages it has taken (handled or coalesced
	// away) and the time it last did what had come due; tests use it to move
	// a fake clock only once the worker waits on it, and to know the worker
	// has acted on the new time.
	idleHook func(chat string, handled int, at time.Time)
}

// route is a registered channel with its capabilities.
type route struct {
	ch      Channel
	r       Renderer
	chunks  ChunkRenderer // nil when r lacks it
	editor  Editor
	deleter Deleter
	typer   Typer
	out     config.OutputConfig
}

type chatKey struct{ channel, chat string }

// NewManager returns a manager consuming src (bus.Outbound()). Register the
// channels, then Run it.
func NewManager(src <-chan bus.OutboundMessage, cfg ManagerConfig, log *zap.Logger) *Manager {
	cfg = cfg.withDefaults()
	return &Manager{
		src:       src,
		cfg:       cfg,
		log:       log,
		clock:     cfg.Clock,
		routes:    map[string]*route{},
		receivers: map[string]Receiver{},
		workers:   map[chatKey]*worker{},
		closing:   make(chan struct{}),
	}
}

// Register adds a channel. r renders its Markdown (and chunks it); out says
// whether to stream drafts and show tool hints, and is taken as config gives
// it (channels.<name>.edit_interval is validated positive there; zero would
// edit on every draft). Streaming needs the channel to implement Editor.
// Register must be called before Run.
func (m *Manager) Register(ch Channel, r Renderer, out config.OutputConfig) error {
	if _, dup := m.receivers[ch.Name()]; dup {
		return fmt.Errorf("channels: register %s: already registered", ch.Name())
	}
	if _, dup := m.routes[ch.Name()]; dup {
		return fmt.Errorf("channels: register %s: already registered", ch.Name())
	}
	if r == nil {
		return fmt.Errorf("channels: register %s: no renderer", ch.Name())
	}
	rt := &route{ch: ch, r: r, out: out}
	rt.chunks, _ = r.(ChunkRenderer)
	rt.editor, _ = ch.(Editor)
	rt.deleter, _ = ch.(Deleter)
	rt.typer, _ = ch.(Typer)
	if rt.editor == nil {
		rt.out.Streaming = false
	}
	m.routes[ch.Name()] = rt
	return nil
}

// Receiver is implemented by in-process surfaces (the browser page, the
// OpenAI-compatible API) that take the agent's outbound messages as they are:
// unrendered Markdown, drafts and statuses included, no chunking, no
// platform calls. Receive must not block (hand the message to a buffered
// subscriber or drop it for a gone client): the manager calls it on its own
// goroutine, in bus order, and then calls the message's Delivered, because
// the turn's messages are in the session whatever the client does.
type Receiver interface {
	Receive(m bus.OutboundMessage)
}

// RegisterReceiver routes the messages of channel name to r. Like Register,
// it must be called before Run, and a name is registered once.
func (m *Manager) RegisterReceiver(name string, r Receiver) error {
	if _, dup := m.routes[name]; dup {
		return fmt.Errorf("channels: register %s: already registered", name)
	}
	if _, dup := m.receivers[name]; dup {
		return fmt.Errorf("channels: register %s: already registered", name)
	}
	m.receivers[name] = r
	return nil
}

// Run delivers outbound messages until the source is closed (then it
// delivers everything queued and returns nil) or ctx ends (then it stops
// taking messages, delivers what is queued within DrainTimeout and returns
// nil). Typing indicators are stopped either way.
func (m *Manager) Run(ctx context.Context) error {
	m.workCtx, m.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer m.cancelWork()
	for {
		select {
		case msg, ok := <-m.src:
			if !ok {
				m.shutdown(ctx)
				return nil
			}
			if err := m.dispatch(ctx, msg); err != nil {
				m.shutdown(ctx)
				return nil
			}
		case <-ctx.Done():
			m.shutdown(ctx)
			return nil
		}
	}
}

// shutdown stops intake and waits for the workers to deliver what they hold;
// once ctx has ended, they get DrainTimeout more before their calls are
// cancelled.
func (m *Manager) shutdown(ctx context.Context) {
	close(m.closing)
	// Parked chats get their workers now, past the cap: what they hold is
	// delivered like everything else queued (within DrainTimeout).
	m.mu.Lock()
	for m.parked.Len() > 0 {
		m.startParkedLocked()
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	t := m.clock.NewTimer(m.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		m.log.Warn("outbound drain timed out; undelivered messages dropped", zap.Int("chats", m.Workers()))
		m.cancelWork()
		<-done
	}
}

// dispatch queues msg on its chat's worker, starting one if needed, or
// parking the chat when MaxChats workers run. It waits only for a chat whose
// queue is over ChatQueue, and returns an error only when ctx ended then.
func (m *Manager) dispatch(ctx context.Context, msg bus.OutboundMessage) error {
	if r, ok := m.receivers[msg.Channel]; ok {
		r.Receive(msg)
		m.reply(msg.Channel, msg, ReplyDelivered)
		if msg.Delivered != nil {
			msg.Delivered()
		}
		return nil
	}
	rt := m.routes[msg.Channel]
	if rt == nil {
		m.log.Warn("outbound message for an unknown channel dropped",
			zap.String("channel", msg.Channel), zap.String("chat", msg.ChatID), zap.Stringer("kind", msg.Kind))
		m.reply(msg.Channel, msg, ReplyFailed)
		if msg.Delivered != nil {
			msg.Delivered() // nothing will ever deliver it
		}
		return nil
	}
	key := chatKey{msg.Channel, msg.ChatID}
	m.mu.Lock()
	w := m.workers[key]
	if w == nil {
		w = newWorker(m, rt, key)
		m.workers[key] = w
		m.wg.Add(1)
		if m.running < m.cfg.MaxChats {
			m.startLocked(w)
		} else {
			w.parkElem = m.parked.PushBack(w)
			m.retireIdleLocked()
		}
	}
	n := w.box.push(msg)
	parked := w.parkElem != nil
	m.mu.Unlock()
	if n > m.cfg.ChatQueue && !parked {
		return w.box.waitBelow(ctx, m.cfg.ChatQueue)
	}
	return nil
}

// startLocked runs w's goroutine; m.mu is held.
func (m *Manager) startLocked(w *worker) {
	m.running++
	go w.run()
}

// startParkedLocked gives the oldest parked chat its worker; m.mu is held.
func (m *Manager) startParkedLocked() {
	w := m.parked.Remove(m.parked.Front()).(*worker)
	w.parkElem = nil
	m.startLocked(w)
}

// retireIdleLocked asks the least recently active idle worker to retire at
// once, making room for a parked chat. A worker that got a message since
// stays; it retires when it is next idle while chats are parked (goIdle).
// m.mu is held.
func (m *Manager) retireIdleLocked() {
	el := m.idle.Front()
	if el == nil {
		return
	}
	w := m.idle.Remove(el).(*worker)
	w.idleElem = nil
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// goIdle registers w as idle and returns false, or returns true when chats
// are parked: w should then retire at once instead of waiting IdleTimeout.
// One lock makes the check and the registration atomic with dispatch's
// parking, so no parked chat waits for a worker nobody will retire.
func (m *Manager) goIdle(w *worker) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parked.Len() > 0 {
		return true
	}
	if w.idleElem == nil {
		w.idleElem = m.idle.PushBack(w)
	}
	return false
}

// leaveIdle unregisters w as idle (it woke up).
func (m *Manager) leaveIdle(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.idleElem != nil {
		m.idle.Remove(w.idleElem)
		w.idleElem = nil
	}
}

// retire removes w if its mailbox is still empty; it reports whether w may
// exit. Holding m.mu makes this atomic with dispatch's push. The place w
// held goes to the oldest parked chat.
func (m *Manager) retire(w *worker) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.box.len() > 0 {
		return false
	}
	delete(m.workers, w.key)
	if w.idleElem != nil {
		m.idle.Remove(w.idleElem)
		w.idleElem = nil
	}
	m.running--
	if m.parked.Len() > 0 {
		m.startParkedLocked()
	}
	return true
}

// Workers reports how many per-chat workers run, for metrics and tests.
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// Parked reports how many chats wait for a worker (MaxChats run), for
// metrics and tests.
func (m *Manager) Parked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parked.Len()
}

// mailbox is a chat's queue. A draft or status replaces the queued one of
// the same turn when nothing of that turn was queued after it, so a slow
// chat converges to the newest text instead of replaying stale drafts.
type mailbox struct {
	mu        sync.Mutex
	items     []bus.OutboundMessage
	coalesced int           // messages replaced by a newer one before being handled
	signal    chan struct{} // cap 1: something was pushed
	space     chan struct{} // cap 1: something was popped
}

func newMailbox() *mailbox {
	return &mailbox{signal: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func (b *mailbox) push(msg bus.OutboundMessage) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if msg.Kind == bus.KindDraft || msg.Kind == bus.KindStatus {
		for i := len(b.items) - 1; i >= 0; i-- {
			it := b.items[i]
			if it.TurnID != msg.TurnID {
				continue
			}
			if it.Kind == msg.Kind {
				b.items[i] = msg
				b.coalesced++
				return len(b.items)
			}
			break
		}
	}
	b.items = append(b.items, msg)
	select {
	case b.signal <- struct{}{}:
	default:
	}
	return len(b.items)
}

func (b *mailbox) pop() (bus.OutboundMessage, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return bus.OutboundMessage{}, false
	}
	msg := b.items[0]
	b.items[0] = bus.OutboundMessage{}
	b.items = b.items[1:]
	select {
	case b.space <- struct{}{}:
	default:
	}
	return msg, true
}

func (b *mailbox) coalescedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.coalesced
}

func (b *mailbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items)
}

func (b *mailbox) waitBelow(ctx context.Context, n int) error {
	for b.len() > n {
		select {
		case <-b.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// errorKind names an adapter error for logs.
func errorKind(err error) string {
	var rl *RateLimitError
	var uo *UnknownOutcomeError
	var pe *PermanentError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotModified):
		return "not_modified"
	case errors.Is(err, ErrBadMarkup):
		return "bad_markup"
	case errors.As(err, &rl):
		return "rate_limited"
	case errors.As(err, &uo):
		return "unknown_outcome"
	case errors.As(err, &pe):
		return "permanent"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "transient"
}
