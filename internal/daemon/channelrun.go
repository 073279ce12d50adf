package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
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
//
// A token pasted in the setup view replaces the adapter while the daemon
// runs (SetToken): a new one is built from the config with that token, the
// old one is stopped, and the new one is checked and run. The manager routes
// to whichever runs (liveChannel), so nothing else needs to know.
type channelRun struct {
	name string
	log  *zap.Logger
	// tokenVar names where the token comes from, for the advice.
	tokenVar string
	// build makes an adapter from a config; nil when this channel cannot
	// take a new token while it runs (Telegram's webhook mode, whose
	// handler is on the listener already).
	build func(*config.Config) (channels.Channel, error)
	// swapped wakes run when SetToken put a new adapter in next.
	swapped chan struct{}

	mu sync.Mutex
	// ch is the adapter; nil while none could be built (its token's
	// variable is unset): then problem says why, until SetToken.
	ch      channels.Channel
	next    channels.Channel // built by SetToken, not running yet
	stop    func()           // cancels the running adapter's Run
	problem error            // why it is down before or after Run; nil while Run runs
}

func newChannelRun(name string, log *zap.Logger, tokenVar string) *channelRun {
	return &channelRun{name: name, log: log, tokenVar: tokenVar, swapped: make(chan struct{}, 1)}
}

// current is the adapter that runs (or ran last), or nil.
func (r *channelRun) current() channels.Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}

// Healthy is the channel's readiness: the supervisor's problem, else the
// adapter's own (connected to the platform).
func (r *channelRun) Healthy() error {
	r.mu.Lock()
	p, ch := r.problem, r.ch
	r.mu.Unlock()
	if p != nil {
		return p
	}
	if h, ok := ch.(channels.Healther); ok {
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

// errNoLiveToken is SetToken's answer for a channel that takes a new token
// only at the next start.
var errNoLiveToken = errors.New("this channel takes a new token at the next start")

// SetToken builds the adapter anew from cfg (the config with the new token)
// and has run replace the running one with it: the old adapter is stopped,
// the new one's token checked and run. It returns once the new adapter is
// built; whether the platform takes the token shows in Healthy.
func (r *channelRun) SetToken(cfg *config.Config) error {
	if r.build == nil {
		return errNoLiveToken
	}
	ch, err := r.build(cfg)
	if err != nil {
		return fmt.Errorf("channels.%s: %w", r.name, err)
	}
	r.mu.Lock()
	r.next = ch
	stop := r.stop
	r.problem = errors.New("starting with the new token")
	r.mu.Unlock()
	select {
	case r.swapped <- struct{}{}:
	default: // already woken: it takes the newest next
	}
	if stop != nil {
		stop()
	}
	r.log.Info("new bot token: restarting the channel with it")
	return nil
}

// run runs the adapter until ctx ends; when SetToken puts a new one in
// place, it stops the old one and runs the new.
func (r *channelRun) run(ctx context.Context) {
	for {
		r.mu.Lock()
		if r.next != nil {
			r.ch, r.next = r.next, nil
		}
		ch := r.ch
		runCtx, cancel := context.WithCancel(ctx)
		r.stop = cancel
		r.mu.Unlock()
		if ch != nil {
			r.runAdapter(runCtx, ch)
		}
		cancel()
		// Stopped with an error (it stays down with the reason), or for a
		// new token: wait for one, or for the end.
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.swapped:
			}
			r.mu.Lock()
			fresh := r.next != nil
			r.mu.Unlock()
			if fresh {
				break
			}
		}
	}
}

// runAdapter checks ch's token until it is accepted (or the platform
// cannot be reached, which the adapter's own reconnecting handles), then
// runs it until ctx ends.
func (r *channelRun) runAdapter(ctx context.Context, ch channels.Channel) {
	if c, ok := ch.(tokenChecker); ok {
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
	if err := ch.Run(ctx); err != nil && ctx.Err() == nil {
		r.set(fmt.Errorf("stopped: %w (%s; restart the gateway after fixing it)", err, r.tokenHint()))
		r.log.Error("channel stopped; the others keep serving", zap.Error(err))
	}
}

// liveChannel is what the manager routes a supervised channel's messages
// to: the adapter its supervisor runs now, so a new token swaps the adapter
// without registering it again. Both chat adapters edit, delete and type.
type liveChannel struct{ r *channelRun }

var (
	_ channels.Editor  = liveChannel{}
	_ channels.Deleter = liveChannel{}
	_ channels.Typer   = liveChannel{}
)

func (l liveChannel) Name() string { return l.r.name }

// Run is the supervisor's, never the manager's.
func (l liveChannel) Run(context.Context) error {
	return fmt.Errorf("channel %s: runs under its supervisor", l.r.name)
}

// down is the error of a call while no adapter exists: retrying cannot
// help before a token is given.
func (l liveChannel) down() error {
	err := l.r.Healthy()
	if err == nil {
		err = errors.New("no adapter")
	}
	return &channels.PermanentError{Err: fmt.Errorf("channel %s is down: %w", l.r.name, err)}
}

func (l liveChannel) Send(ctx context.Context, m channels.Outgoing) (channels.Sent, error) {
	ch := l.r.current()
	if ch == nil {
		return channels.Sent{}, l.down()
	}
	return ch.Send(ctx, m)
}

func (l liveChannel) Edit(ctx context.Context, ref channels.Sent, text string, plain bool) error {
	if e, ok := l.r.current().(channels.Editor); ok {
		return e.Edit(ctx, ref, text, plain)
	}
	return l.down()
}

func (l liveChannel) Delete(ctx context.Context, ref channels.Sent) error {
	if d, ok := l.r.current().(channels.Deleter); ok {
		return d.Delete(ctx, ref)
	}
	return l.down()
}

func (l liveChannel) Typing(ctx context.Context, chatID string, metadata map[string]string) error {
	if t, ok := l.r.current().(channels.Typer); ok {
		return t.Typing(ctx, chatID, metadata)
	}
	return l.down()
}

// TypingInterval is the running adapter's, or Telegram's shorter 4 s.
func (l liveChannel) TypingInterval() time.Duration {
	if t, ok := l.r.current().(channels.Typer); ok {
		return t.TypingInterval()
	}
	return 4 * time.Second
}

func (r *channelRun) tokenHint() string {
	key := ChannelTokenKey(r.name)
	if r.tokenVar != "" {
		return fmt.Sprintf("put a valid token in %s (%s)", r.tokenVar, key)
	}
	return "put a valid token in " + key
}
