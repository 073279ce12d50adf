package natsbus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRetry: how many attempts Retry makes, what it warns about and what
// it returns, for attempts that fail n times before succeeding, with ctx
// ending after some of them.
func TestRetry(t *testing.T) {
	down := errors.New("nats down")
	for _, tc := range []struct {
		name      string
		failures  int // attempts that fail before one succeeds
		cancelAt  int // the attempt during which ctx ends (0: never)
		wantTries int
		wantWarns int
		wantErr   bool
	}{
		{"succeeds at once", 0, 0, 1, 0, false},
		{"succeeds after failures, warning once", 3, 0, 4, 1, false},
		{"ctx ends after a warned failure", 5, 2, 2, 1, true},
		{"ctx ends during the first attempt: no warning", 5, 1, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tries, warns := 0, 0
			err := Retry(ctx, time.Millisecond, func(err error) {
				if !errors.Is(err, down) {
					t.Errorf("warned about %v", err)
				}
				warns++
			}, func() error {
				tries++
				if tries == tc.cancelAt {
					cancel()
				}
				if tries <= tc.failures {
					return down
				}
				return nil
			})
			if tries != tc.wantTries || warns != tc.wantWarns {
				t.Errorf("%d attempts, %d warnings; want %d, %d", tries, warns, tc.wantTries, tc.wantWarns)
			}
			if !tc.wantErr {
				if err != nil {
					t.Errorf("Retry = %v", err)
				}
				return
			}
			if !errors.Is(err, down) || !errors.Is(err, context.Canceled) {
				t.Errorf("Retry = %v, want the last failure joined with ctx's error", err)
			}
		})
	}
}
