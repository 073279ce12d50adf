package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
)

// recorder notes the order stages start and stop in.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// plain is a stage that notes its start and stop and stops at once.
func plain(r *recorder, name string) stage {
	return stage{name: name, deadline: time.Second,
		start: func() error { r.note("start " + name); return nil },
		stop:  func(context.Context) error { r.note("stop " + name); return nil }}
}

// TestLifecycleOrder: stages start in order and stop in reverse.
func TestLifecycleOrder(t *testing.T) {
	r := &recorder{}
	l := &lifecycle{stages: []stage{plain(r, "a"), plain(r, "b"), plain(r, "c")}, log: zaptest.NewLogger(t)}
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := r.got(); !slices.Equal(got, want) {
		t.Errorf("order = %q, want %q", got, want)
	}
}

// TestLifecycleFailedStart: a stage that cannot start stops the ones
// before it, in reverse, and the later ones never start.
func TestLifecycleFailedStart(t *testing.T) {
	r := &recorder{}
	bad := stage{name: "b", start: func() error { return errors.New("port taken") }}
	l := &lifecycle{stages: []stage{plain(r, "a"), bad, plain(r, "c")}, log: zaptest.NewLogger(t)}
	err := l.start()
	if err == nil || !strings.Contains(err.Error(), "start b: port taken") {
		t.Fatalf("start = %v, want b's error", err)
	}
	if got, want := r.got(), []string{"start a", "stop a"}; !slices.Equal(got, want) {
		t.Errorf("order = %q, want %q", got, want)
	}
}

// TestLifecycleStuckStage: a stage whose stop ignores its deadline is
// reported as stuck and the stages before it still stop; shutdown does not
// wait for it. In a synctest bubble, time moves only when every goroutine
// waits, so the deadlines pass at once and nothing is timed.
func TestLifecycleStuckStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		release := make(chan struct{})
		hung := stage{name: "hung", deadline: 3 * time.Second,
			stop: func(ctx context.Context) error {
				<-release // ignores ctx: a part that hangs
				return nil
			}}
		var told error
		polite := stage{name: "polite", deadline: time.Second,
			stop: func(ctx context.Context) error {
				<-ctx.Done() // stops only when told at its deadline
				told = ctx.Err()
				r.note("stop polite")
				return nil
			}}
		l := &lifecycle{stages: []stage{plain(r, "first"), hung, polite}, log: zaptest.NewLogger(t)}
		if err := l.start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := l.stop()
		took := time.Since(start)
		close(release)

		var stuck *StuckError
		if !errors.As(err, &stuck) || stuck.Stage != "hung" || stuck.Deadline != 3*time.Second {
			t.Fatalf("stop = %v, want hung reported as stuck", err)
		}
		if !errors.Is(told, context.DeadlineExceeded) {
			t.Errorf("polite was told %v, want its deadline", told)
		}
		if got, want := r.got(), []string{"start first", "stop polite", "stop first"}; !slices.Equal(got, want) {
			t.Errorf("order = %q, want %q", got, want)
		}
		// Fake time: exactly polite's deadline, then hung's and stuckAfter.
		if want := time.Second + 3*time.Second + stuckAfter; took != want {
			t.Errorf("shutdown took %s of fake time, want %s", took, want)
		}
	})
}

// TestLifecycleFromSignal: a deadline counted from the signal shrinks by
// the time the stages before it took.
func TestLifecycleFromSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var left time.Duration
		slow := stage{name: "slow", deadline: 10 * time.Second,
			stop: func(ctx context.Context) error { time.Sleep(4 * time.Second); return nil }}
		grace := stage{name: "grace", deadline: 10 * time.Second, fromSignal: true,
			stop: func(ctx context.Context) error {
				d, _ := ctx.Deadline()
				left = time.Until(d)
				return nil
			}}
		l := &lifecycle{stages: []stage{grace, slow}, log: zaptest.NewLogger(t)}
		if err := l.start(); err != nil {
			t.Fatal(err)
		}
		if err := l.stop(); err != nil {
			t.Fatal(err)
		}
		if left != 6*time.Second {
			t.Errorf("grace had %s left, want 6s (10s from the signal, 4s spent)", left)
		}
	})
}

// TestWorkStopAfter: work asked to finish is waited for until the
// deadline, then cancelled.
func TestWorkStopAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		queue := make(chan struct{})
		w := newWork(context.Background())
		w.Go(func(ctx context.Context) error {
			select {
			case <-queue: // finishes when its queue closes
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		late := false
		if err := w.stopAfter(func() { close(queue) }, func() { late = true })(ctx); err != nil || late {
			t.Errorf("finished work: err %v, late %v; want nil, false", err, late)
		}

		stubborn := newWork(context.Background())
		stubborn.Go(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		if err := stubborn.stopAfter(func() {}, func() { late = true })(ctx2); !errors.Is(err, context.Canceled) || !late {
			t.Errorf("unfinished work: err %v, late %v; want it cancelled at the deadline", err, late)
		}
	})
}

// TestGatewayStageOrder pins the gateway's order: what a stage needs while
// it stops must stop after it (see stages).
func TestGatewayStageOrder(t *testing.T) {
	g := &Gateway{cfg: &config.Config{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var names []string
	for _, s := range g.stages(ctx, cancel) {
		names = append(names, s.name)
		if s.deadline <= 0 && s.name != "agent" { // the agent's is gateway.shutdown_grace
			t.Errorf("stage %s has no stop deadline", s.name)
		}
	}
	want := []string{"listener", "bus", "api", "outbound", "mcp", "agent", "intake"}
	if !slices.Equal(names, want) {
		t.Errorf("stages = %q, want %q", names, want)
	}
}
