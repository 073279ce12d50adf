package natsbus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// takeInbound serves one partition on a worker: while the worker has a free
// slot it asks for the partition's next message and hands it to the local
// inbound queue. It returns when ctx ends or the local queue closed.
func (b *Bus) takeInbound(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		if b.slots.waitFree(ctx) != nil {
			return
		}
		fetchCtx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := cons.Fetch(1, jetstream.FetchContext(fetchCtx))
		if err != nil {
			cancel()
			b.log.Debug("nats: fetch", zap.Error(err))
			_ = sleep(ctx, retryWait)
			continue
		}
		open := true
		for msg := range batch.Messages() {
			open = b.holdInbound(ctx, msg)
		}
		cancel()
		if !open {
			return
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			b.log.Debug("nats: fetch", zap.Error(err))
			_ = sleep(ctx, retryWait)
		}
	}
}

// holdInbound hands one inbound message to the agent, holding it until the
// agent acknowledges it. It reports false once the local queue is closed.
func (b *Bus) holdInbound(ctx context.Context, msg jetstream.Msg) bool {
	m, err := decodeIn(msg.Data())
	if err != nil {
		// Nothing can ever read it: drop it rather than block its chats.
		b.log.Error("nats: dropping an inbound message that does not decode", zap.String("subject", msg.Subject()), zap.Error(err))
		_ = msg.Term()
		return true
	}
	if b.answered.redelivered(msg) {
		// Its acknowledgement was lost (a NATS restart): this worker
		// already handed its answer on. Confirm it again, answer nothing.
		b.log.Info("nats: message came back after its answer; acknowledging it again", zap.String("session", m.Key()))
		b.confirm(msg)
		return true
	}
	if !b.slots.tryTake() {
		// Another partition's message filled the last slot meanwhile: give
		// this one back at once, to a worker with room.
		_ = msg.Nak()
		return true
	}
	// A partition hands out one message at a time (MaxAckPending 1): the
	// rest of a backlog comes only after this one's turn, so waiting for it
	// (bus.InboundMessage.More) would only delay the answer.
	m.More = false
	h := &heldMsg{msg: msg, key: m.Key(), slot: true}
	b.held.add(h)
	m.Ack = func() { b.settle(h, true) }
	if b.opts.OnTake != nil {
		b.opts.OnTake(m.Key())
	}
	if err := b.local.PublishInbound(ctx, m); err != nil {
		b.settle(h, false)
		return !errors.Is(err, bus.ErrClosed)
	}
	return true
}

// takeOutbound serves the channels process: it hands the outbound stream's
// messages, in order, to the local outbound queue. A final answer or a
// standalone message is acknowledged when the channel manager reports it
// delivered; progress (start, draft, status) as soon as it is queued.
func (b *Bus) takeOutbound(ctx context.Context, cons jetstream.Consumer) {
	it, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		b.log.Error("nats: outbound consumer", zap.Error(err))
		return
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			b.log.Debug("nats: outbound consumer", zap.Error(err))
			_ = sleep(ctx, retryWait) // the iterator re-pulls by itself; do not spin on a repeated error
			continue
		}
		m, err := decodeOut(msg.Data())
		if err != nil {
			b.log.Error("nats: dropping an outbound message that does not decode", zap.String("subject", msg.Subject()), zap.Error(err))
			_ = msg.Term()
			continue
		}
		h := &heldMsg{msg: msg}
		b.held.add(h)
		final := m.Kind == bus.KindFinal || m.Kind == bus.KindMessage
		if final {
			m.Delivered = func() { b.settle(h, true) }
		}
		if err := b.local.PublishOutbound(ctx, m); err != nil {
			// Shutting down: the stream keeps it for the next start.
			b.settle(h, false)
			return
		}
		if !final {
			b.settle(h, true)
		}
	}
}

// settle ends holding h: acknowledged (done) or handed back to the stream
// (another worker, or the next start, takes it). Only the first call counts.
func (b *Bus) settle(h *heldMsg, done bool) {
	if !b.held.remove(h) {
		return
	}
	if h.slot {
		b.slots.free()
	}
	if !done {
		if err := h.msg.Nak(); err != nil {
			b.log.Debug("nats: hand back", zap.Error(err))
		}
		return
	}
	if h.slot {
		b.answered.add(h.msg)
	}
	b.confirm(h.msg)
}

// confirm acknowledges msg and waits for the server to confirm it,
// retrying across a reconnect (within publishFor): a lost acknowledgement
// makes the message come back.
func (b *Bus) confirm(msg jetstream.Msg) {
	deadline := time.Now().Add(publishFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := msg.DoubleAck(ctx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return
		}
		// Closed (Run has ended) is for good, unlike a reconnect: waiting
		// publishFor for it held a stopping process two minutes.
		if time.Now().After(deadline) || b.nc.IsClosed() {
			b.log.Warn("nats: acknowledgement not confirmed; the message may come back", zap.String("subject", msg.Subject()), zap.Error(err))
			return
		}
		_ = sleep(context.Background(), retryWait)
	}
}

// heartbeat tells the server every third of ack_wait that the held messages
// are still being worked on, so a long turn keeps its message and only a
// dead (or cut off) process loses it.
func (b *Bus) heartbeat(ctx context.Context) {
	t := time.NewTicker(b.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, h := range b.held.all() {
				if err := h.msg.InProgress(); err != nil {
					b.log.Debug("nats: heartbeat", zap.Error(err))
				}
			}
		}
	}
}

// handBack returns every message still held to the stream, at shutdown.
func (b *Bus) handBack() {
	for _, h := range b.held.all() {
		b.settle(h, false)
	}
}

// onStop answers a /stop request when this worker holds a message of its
// session: the running turn is here. Other workers stay silent.
func (b *Bus) onStop(req *nats.Msg) {
	m, err := decodeIn(req.Data)
	if err != nil || !b.held.holds(m.Key()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	if err := b.local.PublishInbound(ctx, m); err != nil {
		return // shutting down: the caller sends it through the stream
	}
	_ = req.Respond([]byte("ok"))
}

// stopRunning offers a /stop to the worker running its session and reports
// whether one took it.
func (b *Bus) stopRunning(ctx context.Context, data []byte) bool {
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	_, err := b.nc.RequestWithContext(ctx, b.n.stopSubject(), data)
	return err == nil
}

// heldMsg is a message this process took and has not settled yet.
type heldMsg struct {
	msg  jetstream.Msg
	key  string // session key, for inbound
	slot bool   // holds one of the worker's slots
}

// held is the set of messages a process holds.
type held struct {
	mu sync.Mutex
	m  map[*heldMsg]struct{}
}

func newHeld() *held { return &held{m: map[*heldMsg]struct{}{}} }

func (h *held) add(m *heldMsg) {
	h.mu.Lock()
	h.m[m] = struct{}{}
	h.mu.Unlock()
}

// remove reports whether m was held.
func (h *held) remove(m *heldMsg) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[m]
	delete(h.m, m)
	return ok
}

func (h *held) holds(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for m := range h.m {
		if m.key == key {
			return true
		}
	}
	return false
}

func (h *held) all() []*heldMsg {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*heldMsg, 0, len(h.m))
	for m := range h.m {
		out = append(out, m)
	}
	return out
}

func (h *held) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// slots counts a worker's inbound messages against its capacity.
type slots struct {
	mu    sync.Mutex
	used  int
	cap   int
	freed chan struct{} // closed (and replaced) when a slot frees up
}

func newSlots(n int) *slots { return &slots{cap: n, freed: make(chan struct{})} }

func (s *slots) tryTake() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.cap {
		return false
	}
	s.used++
	return true
}

func (s *slots) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	close(s.freed)
	s.freed = make(chan struct{})
}

// waitFree blocks until a slot is free (without taking it) or ctx ends.
func (s *slots) waitFree(ctx context.Context) error {
	for {
		s.mu.Lock()
		free, freed := s.used < s.cap, s.freed
		s.mu.Unlock()
		if free {
			return nil
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// answeredSet remembers the stream sequences of the last inbound messages
// this worker acknowledged, so one that comes back because its
// acknowledgement was lost is recognised without asking the agent.
type answeredSet struct {
	mu   sync.Mutex
	seqs map[uint64]struct{}
	ring []uint64
	next int
}

func newAnsweredSet(n int) *answeredSet {
	return &answeredSet{seqs: make(map[uint64]struct{}, n), ring: make([]uint64, n)}
}

func (a *answeredSet) add(msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seqs, a.ring[a.next])
	a.ring[a.next] = md.Sequence.Stream
	a.next = (a.next + 1) % len(a.ring)
	a.seqs[md.Sequence.Stream] = struct{}{}
}

// redelivered reports whether msg is a redelivery of one answered here.
func (a *answeredSet) redelivered(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil || md.NumDelivered < 2 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.seqs[md.Sequence.Stream]
	return ok
}
