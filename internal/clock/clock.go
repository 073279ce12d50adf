// Package clock is the one seam through which tests move time: the real
// clock (System), a fake that moves only when a test says so (Fake), and
// Func for a test that only reads a time it sets. Code whose timing is
// tested (throttling, typing refreshes, retry and backoff waits, circuit
// breakers, idle reaping, expiry, cron) takes a Clock; nothing else in the
// product is a time seam (docs/architecture.md, "Time"). It is a leaf: any
// package may import it.
package clock

import (
	"context"
	"time"
)

// Clock is a time source. Code that waits takes one so tests can inject Fake.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the machinery uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// System is the real clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// NewTimer returns a real timer.
func (System) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Sleep waits d on clock, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Func is a Clock whose Now is f and whose timers are real: for a test that
// reads a time it sets (an expiry, a date) and waits for nothing.
type Func func() time.Time

// Now returns f().
func (f Func) Now() time.Time { return f() }

// NewTimer returns a real timer.
func (Func) NewTimer(d time.Duration) Timer { return System{}.NewTimer(d) }
