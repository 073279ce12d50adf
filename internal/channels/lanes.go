package channels

import (
	"context"
	"errors"
	"sync"
)

// ErrLanesClosed is returned by Lanes.Go after Close: the caller should
// leave the work undone (and unacknowledged, so it is redelivered).
var ErrLanesClosed = errors.New("lanes closed")

// Lanes runs functions in order per key (a chat) and different keys in
// parallel, for adapters handling inbound messages: one chat's messages stay
// ordered while a slow download in one chat does not hold up the others. A
// key's goroutine exits when its lane is empty. At most max functions wait
// or run at once; Go blocks beyond that, slowing the reader instead of
// growing memory.
type Lanes struct {
	mu     sync.Mutex
	lanes  map[string][]func()
	closed bool
	wg     sync.WaitGroup
	slots  chan struct{}
}

// NewLanes returns lanes admitting at most max queued or running functions.
func NewLanes(max int) *Lanes {
	if max <= 0 {
		max = 1024
	}
	return &Lanes{lanes: map[string][]func(){}, slots: make(chan struct{}, max)}
}

// Go queues fn on key's lane. It blocks while max functions are pending, and
// fails with ctx's error or ErrLanesClosed.
func (l *Lanes) Go(ctx context.Context, key string, fn func()) error {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		<-l.slots
		return ErrLanesClosed
	}
	q, running := l.lanes[key]
	l.lanes[key] = append(q, fn)
	if !running {
		l.wg.Add(1)
		go l.run(key)
	}
	return nil
}

func (l *Lanes) run(key string) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		q := l.lanes[key]
		if len(q) == 0 {
			delete(l.lanes, key)
			l.mu.Unlock()
			return
		}
		fn := q[0]
		q[0] = nil
		l.lanes[key] = q[1:]
		l.mu.Unlock()
		fn()
		<-l.slots
	}
}

// Close refuses new work and waits until every queued function has run.
func (l *Lanes) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
}
