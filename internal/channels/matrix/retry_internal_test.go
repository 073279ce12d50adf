package matrix

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
)

// TestRetryBacksOff: a failing homeserver is tried again after a jittered
// wait that doubles from a second up to two minutes, never sooner than a
// retry_after_ms, and a refused token is not tried again.
func TestRetryBacksOff(t *testing.T) {
	fake := clock.NewFake()
	c := &Channel{deps: Deps{Clock: fake}, log: zap.NewNop()}
	errs := []error{
		errors.New("connection refused"), errors.New("connection refused"), errors.New("connection refused"),
		&channels.RateLimitError{RetryAfter: 10 * time.Second, Err: errors.New("M_LIMIT_EXCEEDED")},
	}
	for range 8 {
		errs = append(errs, errors.New("502"))
	}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- c.retry(context.Background(), "sync", func() error {
			calls++
			if calls <= len(errs) {
				return errs[calls-1]
			}
			return nil
		})
	}()
	var waits []time.Duration
	for len(waits) < len(errs) {
		if !fake.WaitForTimers(context.Background(), 1) {
			t.Fatal("no timer")
		}
		d, _ := fake.NextDeadline()
		waits = append(waits, d)
		fake.Advance(d)
	}
	if err := <-done; err != nil {
		t.Fatalf("retry = %v", err)
	}
	for i, d := range waits {
		ceiling := min(time.Second<<i, 2*time.Minute)
		floor := ceiling / 2
		if i == 3 {
			floor = 10 * time.Second // the server's retry_after_ms
		}
		if d < floor || d > max(ceiling, floor) {
			t.Errorf("wait %d = %s, want within [%s, %s]", i, d, floor, max(ceiling, floor))
		}
	}

	refused := &channels.PermanentError{Err: fatal{channels.ErrTokenRefused}}
	if err := c.retry(context.Background(), "whoami", func() error { return refused }); !errors.Is(err, channels.ErrTokenRefused) {
		t.Errorf("a refused token: retry = %v, want it returned at once", err)
	}
}
