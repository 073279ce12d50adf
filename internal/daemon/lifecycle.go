package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// A stage is one part of a running daemon with its own start and stop:
// the listener, the bus, the outbound manager, the agent, the intake. A
// lifecycle starts its stages in order and stops them in reverse, so that
// whatever a stage needs while it stops (the bus for the agent's last
// replies, the listener for the probes) is still there. Each stop has its
// own deadline: when it passes, the stage is told to stop at once (its
// context is cancelled), and a stage that still has not stopped
// stuckAfter later is reported and left behind, so that one part that
// hangs cannot hold the daemon's exit (docs/operations.md#shutdown).
type stage struct {
	name string
	// start starts the stage's work and returns; what it starts runs
	// until stop. An error stops the stages already started, in reverse.
	start func() error
	// stop ends what start started and returns when it has ended. ctx
	// ends at the stage's deadline: then what is left must be cancelled.
	stop func(ctx context.Context) error
	// deadline bounds stop; fromSignal counts it from the start of the
	// shutdown rather than from this stage's turn to stop (the grace of
	// the running turns is counted from the signal).
	deadline   time.Duration
	fromSignal bool
}

// stuckAfter is how long a stage may take to return once its deadline
// has passed and its work was cancelled, before it is reported as stuck:
// as long as the outbound manager's calls in flight may take to end.
const stuckAfter = outboundDrain

// StuckError reports a stage that did not stop within its deadline and
// stuckAfter; shutdown went on without it.
type StuckError struct {
	Stage    string
	Deadline time.Duration
}

func (e *StuckError) Error() string {
	return fmt.Sprintf("stage %s did not stop within %s (+%s after its work was cancelled); left behind", e.Stage, e.Deadline, stuckAfter)
}

// lifecycle runs stages: start in order, stop in reverse.
type lifecycle struct {
	stages  []stage
	log     *zap.Logger
	started int // how many stages have started
}

// start starts every stage in order. When one fails, the ones before it
// are stopped in reverse and its error returned (with theirs).
func (l *lifecycle) start() error {
	for _, s := range l.stages {
		if s.start != nil {
			if err := s.start(); err != nil {
				return errors.Join(fmt.Errorf("start %s: %w", s.name, err), l.stop())
			}
		}
		l.started++
		l.log.Debug("stage started", zap.String("stage", s.name))
	}
	return nil
}

// stop stops the started stages in reverse order, each within its
// deadline, and returns what they returned, a stuck one as *StuckError.
func (l *lifecycle) stop() error {
	began := time.Now()
	var errs []error
	for i := l.started - 1; i >= 0; i-- {
		s := l.stages[i]
		if err := l.stopOne(s, began); err != nil {
			errs = append(errs, err)
		}
	}
	l.started = 0
	return errors.Join(errs...)
}

// stopOne stops s within its deadline and stuckAfter.
func (l *lifecycle) stopOne(s stage, began time.Time) error {
	if s.stop == nil {
		return nil
	}
	deadline := s.deadline
	if s.fromSignal {
		deadline = max(0, s.deadline-time.Since(began))
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	// The one goroutine a lifecycle may leave behind: a stop that does not
	// return. It owns nothing the daemon still needs; the process exits.
	go func() { done <- s.stop(ctx) }()
	stuck := time.NewTimer(deadline + stuckAfter)
	defer stuck.Stop()
	select {
	case err := <-done:
		l.log.Debug("stage stopped", zap.String("stage", s.name))
		if err != nil {
			return fmt.Errorf("stop %s: %w", s.name, err)
		}
		return nil
	case <-stuck.C:
		err := &StuckError{Stage: s.name, Deadline: s.deadline}
		l.log.Error("stage did not stop; shutting down without it", zap.String("stage", s.name), zap.Duration("deadline", s.deadline))
		return err
	}
}

// work is the goroutines of one stage: each runs until the stage's
// context ends; the stage's stop cancels it and waits for them.
type work struct {
	ctx    context.Context
	cancel context.CancelFunc
	eg     errgroup.Group
}

// newWork returns the goroutines' owner, their context derived from parent.
func newWork(parent context.Context) *work {
	ctx, cancel := context.WithCancel(parent)
	return &work{ctx: ctx, cancel: cancel}
}

// Go runs f on the stage's context.
func (w *work) Go(f func(ctx context.Context) error) { w.eg.Go(func() error { return f(w.ctx) }) }

// wait waits for every goroutine, or until ctx ends; finished says which.
func (w *work) wait(ctx context.Context) (finished bool, err error) {
	done := make(chan error, 1)
	go func() { done <- w.eg.Wait() }()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// stopAfter is a stage's stop for work that finishes by itself once asked
// (ask: close its queue): it waits for it until ctx ends, then cancels
// what is left (late says so in the log) and waits for that.
func (w *work) stopAfter(ask func(), late func()) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if ask != nil {
			ask()
		}
		if finished, err := w.wait(ctx); finished {
			w.cancel()
			return err
		}
		if late != nil {
			late()
		}
		w.cancel()
		return w.eg.Wait()
	}
}

// stopNow is a stage's stop for work that runs until cancelled.
func (w *work) stopNow(ctx context.Context) error {
	w.cancel()
	_, err := w.wait(ctx)
	return err
}
