package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestStartReleaseReleasesOnceReady(t *testing.T) {
	cases := []struct {
		name        string
		readyAfter  int64 // asks answered false before the first true; -1 never
		limit       time.Duration
		cancel      bool
		wantRelease int64
	}{
		{"ready at once", 0, time.Hour, false, 1},
		{"ready after a few polls", 3, time.Hour, false, 1},
		{"never ready: released at the limit", -1, 20 * time.Millisecond, false, 1},
		{"stopped before ready: nothing released", -1, time.Hour, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asks, released atomic.Int64
			s := startRelease{
				ready: func() bool {
					n := asks.Add(1) - 1
					return tc.readyAfter >= 0 && n >= tc.readyAfter
				},
				release: func() { released.Add(1) },
				poll:    time.Millisecond,
				limit:   tc.limit,
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); s.run(ctx) }()
			if tc.cancel {
				for asks.Load() < 3 {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("run did not return")
			}
			if got := released.Load(); got != tc.wantRelease {
				t.Errorf("released %d times, want %d", got, tc.wantRelease)
			}
			if tc.readyAfter > 0 && asks.Load() != tc.readyAfter+1 {
				t.Errorf("asked %d times, want %d", asks.Load(), tc.readyAfter+1)
			}
		})
	}
}
