package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Backoff for a channel whose token the platform refused: its "who am I"
// is asked again after channelRetryMin, doubling up to channelRetryMax, so
// a token reissued (or a platform that stops refusing) brings it up without
// a restart while the other channels, the page and the API serve.
const (
	channelRetryMin = 2 * time.Second
	channelRetryMax = 5 * time.Minute
)

// channelRun supervises one chat channel: a channel that cannot start is a
// degraded state, never the end of the daemon (docs/operations.md#readiness). Before the
// adapter runs, its token is checked; a refused one is retried with
// backoff. A channel that stops with an error stays down with the reason.
// Its state is what /readyz, status, the metrics and the page show.
type channelRun struct {
	name string
	// ch is the adapter; nil when it could not be built (its token's
	// variable is unset): then problem says why, for good.
	ch  channels.Channel
	log *zap.Logger
	// tokenVar names where the token comes from, for the advice.
	tokenVar string

	mu      sync.Mutex
	problem error // why it is down before or after Run; nil while Run runs
}

// Healthy is the channel's readiness: the supervisor's problem, else the
// adapter's own (connected to the platform).
func (r *channelRun) Healthy() error {
	r.mu.Lock()
	p := r.problem
	r.mu.Unlock()
	if p != nil {
		return p
	}
	if h, ok := r.ch.(channels.Healther); ok {
		return h.Healthy()
	}
	return nil
}

func (r *channelRun) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problem = err
}

// tokenChecker is the part of channels.Adapter a supervisor needs.
type tokenChecker interface {
	Check(ctx context.Context) (string, error)
}

// run checks the token until it is accepted (or the platform cannot be
// reached, which the adapter's own reconnecting handles), then runs the
// adapter until ctx ends.
func (r *channelRun) run(ctx context.Context) {
	if r.ch == nil {
		return
	}
	if c, ok := r.ch.(tokenChecker); ok {
		wait := channelRetryMin
		for {
			_, err := c.Check(ctx)
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, channels.ErrTokenRefused) {
				break
			}
			r.set(fmt.Errorf("the bot token was refused: %s; retrying in %s", r.tokenHint(), wait))
			r.log.Error("bot token refused; the channel stays down and retries", zap.Duration("retry_in", wait), zap.Error(err))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, channelRetryMax)
		}
	}
	r.set(nil)
	if err := r.ch.Run(ctx); err != nil {
		r.set(fmt.Errorf("stopped: %w (%s; restart the gateway after fixing it)", err, r.tokenHint()))
		r.log.Error("channel stopped; the others keep serving", zap.Error(err))
	}
}

func (r *channelRun) tokenHint() string {
	key := ChannelTokenKey(r.name)
	if r.tokenVar != "" {
		return fmt.Sprintf("put a valid token in %s (%s)", r.tokenVar, key)
	}
	return "put a valid token in " + key
}
