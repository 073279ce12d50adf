package bus

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Publish after the queue was closed. Callers should
// stop producing.
var ErrClosed = errors.New("bus closed")

// Bus is a pair of bounded queues: inbound (channels → agent) and outbound
// (agent → channels). It is safe for concurrent use. The queues close
// separately so shutdown can stop intake while replies still flow out.
type Bus struct {
	in  *queue[InboundMessage]
	out *queue[OutboundMessage]
}

// New returns a bus whose queues hold up to size messages each.
func New(size int) *Bus {
	return &Bus{in: newQueue[InboundMessage](size), out: newQueue[OutboundMessage](size)}
}

// PublishInbound queues m for the agent, blocking while the queue is full.
func (b *Bus) PublishInbound(ctx context.Context, m InboundMessage) error {
	return b.in.publish(ctx, m)
}

// PublishOutbound queues m for the channels, blocking while the queue is full.
func (b *Bus) PublishOutbound(ctx context.Context, m OutboundMessage) error {
	return b.out.publish(ctx, m)
}

// Inbound is the agent's receive side; it is closed by CloseInbound once drained.
func (b *Bus) Inbound() <-chan InboundMessage { return b.in.ch }

// Outbound is the channels' receive side; it is closed by CloseOutbound once drained.
func (b *Bus) Outbound() <-chan OutboundMessage { return b.out.ch }

// InboundLen reports the inbound queue depth, for metrics.
func (b *Bus) InboundLen() int { return len(b.in.ch) }

// OutboundLen reports the outbound queue depth, for metrics.
func (b *Bus) OutboundLen() int { return len(b.out.ch) }

// CloseInbound stops intake: later PublishInbound calls fail with ErrClosed,
// and the agent sees Inbound close after the messages already queued.
func (b *Bus) CloseInbound() { b.in.close() }

// CloseOutbound does the same for replies; call it after the agent stopped.
func (b *Bus) CloseOutbound() { b.out.close() }

// Close closes both queues.
func (b *Bus) Close() {
	b.CloseInbound()
	b.CloseOutbound()
}

type queue[T any] struct {
	ch   chan T
	done chan struct{}
	once sync.Once
	// mu is held for reading by senders so that close never closes ch while a
	// send is pending; done is closed first so blocked senders let go.
	mu     sync.RWMutex
	closed bool
}

func newQueue[T any](size int) *queue[T] {
	if size <= 0 {
		size = 1
	}
	return &queue[T]{ch: make(chan T, size), done: make(chan struct{})}
}

func (q *queue[T]) publish(ctx context.Context, m T) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	select {
	case q.ch <- m:
		return nil
	case <-q.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *queue[T]) close() {
	q.once.Do(func() {
		close(q.done)
		q.mu.Lock()
		q.closed = true
		close(q.ch)
		q.mu.Unlock()
	})
}
