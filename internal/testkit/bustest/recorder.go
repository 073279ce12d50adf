// Package bustest plays the channel side of the bus in tests of what
// publishes to it (the agent, the scheduler). Test code only.
package bustest

import (
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// Recorder takes every outbound message as a channel manager would: it
// reports each delivered (OutboundMessage.Delivered) and keeps it.
type Recorder struct {
	mu     sync.Mutex
	out    []bus.OutboundMessage
	notify chan struct{}
	done   chan struct{}
}

// Record drains b's outbound queue until it is closed.
func Record(b *bus.Bus) *Recorder {
	r := &Recorder{notify: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for m := range b.Outbound() {
			if m.Delivered != nil {
				m.Delivered()
			}
			r.mu.Lock()
			r.out = append(r.out, m)
			r.mu.Unlock()
			select {
			case r.notify <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

// Done is closed once the outbound queue was closed and drained.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// All returns the messages taken so far, in order.
func (r *Recorder) All() []bus.OutboundMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bus.OutboundMessage(nil), r.out...)
}

// WaitFor waits until pred holds for the messages so far and returns them;
// after 10 s it fails the test. pred is also re-checked every 5 ms, for
// conditions that depend on more than the outbound stream.
func (r *Recorder) WaitFor(t testing.TB, what string, pred func([]bus.OutboundMessage) bool) []bus.OutboundMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		out := r.All()
		if pred(out) {
			return out
		}
		select {
		case <-r.notify:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; outbound so far: %+v", what, out)
			return nil
		}
	}
}

// Finals returns the final messages (turn answers) in out; with chat set,
// only that chat's.
func Finals(out []bus.OutboundMessage, chat string) []bus.OutboundMessage {
	var fs []bus.OutboundMessage
	for _, m := range out {
		if m.Kind == bus.KindFinal && (chat == "" || m.ChatID == chat) {
			fs = append(fs, m)
		}
	}
	return fs
}
