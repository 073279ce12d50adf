package schedule

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
)

// TestMain fails the package's tests if a scheduler, agent or HTTP
// goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// inbox records what a scheduler publishes, standing in for the bus.
type inbox struct {
	mu     sync.Mutex
	msgs   []bus.InboundMessage
	notify chan struct{}
}

func newInbox() *inbox { return &inbox{notify: make(chan struct{}, 1)} }

func (b *inbox) PublishInbound(ctx context.Context, m bus.InboundMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return nil
}

func (b *inbox) all() []bus.InboundMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bus.InboundMessage(nil), b.msgs...)
}

// wait returns the messages once there are at least n.
func (b *inbox) wait(t *testing.T, n int) []bus.InboundMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if msgs := b.all(); len(msgs) >= n {
			return msgs
		}
		select {
		case <-b.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %d inbound messages; got %d", n, len(b.all()))
		}
	}
}

type runner interface {
	Run(ctx context.Context) error
}

// start runs r until the returned stop is called (or the test ends) and
// checks that Run returned nil.
func start(t *testing.T, r runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// eventually waits until cond holds, for conditions that change in another
// goroutine without a signal the test can wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitArmed waits until the scheduler sleeps on a timer due in d, so that
// advancing the clock by d fires it.
func waitArmed(t *testing.T, fc *clock.Fake, d time.Duration) {
	t.Helper()
	eventually(t, "a timer is armed for "+d.String(), func() bool {
		got, ok := fc.NextDeadline()
		return ok && got == d
	})
}

// The helpers, for the external tests (agent_test.go).
var (
	Start      = start
	WaitArmed  = waitArmed
	Eventually = eventually
)
