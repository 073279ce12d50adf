package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a fake Clock. Time stands still until Advance; timers
// fire when the clock passes their deadline. Tests wait for the code under
// test to arm a timer with WaitForTimers instead of sleeping.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	armed  chan struct{} // closed and replaced whenever a timer is armed
}

// NewFake returns a fake clock set to a fixed instant.
func NewFake() *Fake {
	return &Fake{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC), armed: make(chan struct{})}
}

var _ Clock = (*Fake)(nil)

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a timer that fires when the clock reaches now+d.
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		t.fired = true
		return t
	}
	c.timers = append(c.timers, t)
	close(c.armed)
	c.armed = make(chan struct{})
	return t
}

// Advance moves the clock forward by d, firing every timer that comes due,
// in deadline order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.fired = true
			t.ch <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
}

// Pending reports how many timers are armed and not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDeadline reports the earliest armed timer's deadline relative to now.
func (c *Fake) NextDeadline() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return 0, false
	}
	best := c.timers[0].at
	for _, t := range c.timers[1:] {
		if t.at.Before(best) {
			best = t.at
		}
	}
	return best.Sub(c.now), true
}

// WaitForTimers blocks until at least n timers are armed or ctx ends; it
// reports whether the condition was met.
func (c *Fake) WaitForTimers(ctx context.Context, n int) bool {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return true
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return false
		}
	}
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, o := range c.timers {
		if o == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
