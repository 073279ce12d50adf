package provider

import (
	"context"
	"sync"
	"time"
)

// fakeClock is a Clock whose Sleep returns at once (advancing Now) and
// records every wait, so retry timing is tested without sleeping. With
// block set, Sleep instead signals sleeping and waits for ctx to end.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	waits    []time.Duration
	block    bool
	sleeping chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC), sleeping: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	block := c.block
	if !block {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	if block {
		c.sleeping <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return ctx.Err()
}

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
