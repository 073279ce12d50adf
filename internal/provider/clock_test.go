package provider

import (
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// fakeClock is a clock.Clock whose timers fire at once (advancing Now),
// recording every wait, so retry timing is tested without sleeping. With
// block set, a timer instead signals sleeping and never fires, so the
// router waits for ctx to end.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	waits    []time.Duration
	block    bool
	sleeping chan struct{}
}

var _ clock.Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC), sleeping: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	t := firedTimer(make(chan time.Time, 1))
	if c.block {
		c.sleeping <- struct{}{}
		return t // never fires
	}
	c.now = c.now.Add(d)
	t <- c.now
	return t
}

// firedTimer is a timer whose channel holds its tick (or nothing, never).
type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// halfJitter makes backoff waits predictable: always half the ceiling.
func halfJitter(d time.Duration) time.Duration { return d / 2 }
