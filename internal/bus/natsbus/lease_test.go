package natsbus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// leaseKey is the key the tests compete for.
const leaseKey = "scheduler"

// leading counts the contenders' lead functions running at once; more
// than one is the failure a lease exists to prevent.
type leading struct {
	now, most atomic.Int32
}

func (l *leading) enter() {
	n := l.now.Add(1)
	for {
		m := l.most.Load()
		if n <= m || l.most.CompareAndSwap(m, n) {
			return
		}
	}
}

// contender is one process competing for the lease.
type contender struct {
	node   *node
	lease  *Lease
	starts atomic.Int32 // times lead started
	stops  atomic.Int32 // times lead returned
	stop   func() error // ends Run and returns its error
}

func compete(t *testing.T, n *node, ttl time.Duration, all *leading) *contender {
	t.Helper()
	c := &contender{node: n, lease: n.bus.Lease(leaseKey, ttl)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.lease.Run(ctx, func(ctx context.Context) error {
			c.starts.Add(1)
			all.enter()
			<-ctx.Done()
			all.now.Add(-1)
			c.stops.Add(1)
			return nil
		})
	}()
	var once sync.Once
	var err error
	c.stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = c.stop() })
	return c
}

func (c *contender) leads() bool { return c.lease.Leading() && c.starts.Load() > c.stops.Load() }

// twoContenders starts two processes competing for the lease and waits
// until one of them leads; it returns the leader first.
func twoContenders(t *testing.T, ttl time.Duration, all *leading) (leader, other *contender) {
	t.Helper()
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	a := compete(t, startNode(t, "a", cfg, Roles{}), ttl, all)
	b := compete(t, startNode(t, "b", cfg, Roles{}), ttl, all)
	waitFor(t, "a leader", func() bool { return a.leads() || b.leads() })
	if a.leads() {
		return a, b
	}
	return b, a
}

// leaseTTL is the lease of the tests that hold one through renewals. The
// holder renews every third of it and gives up when a renewal is two thirds
// late; the other process takes over only after the whole ttl. 3 s leaves a
// loaded machine's stalls a second of margin on each (1 s did not).
const leaseTTL = 3 * time.Second

func TestExactlyOneContenderLeads(t *testing.T) {
	const ttl = leaseTTL
	var all leading
	leader, other := twoContenders(t, ttl, &all)
	// Several renewals later the same process still leads, alone.
	time.Sleep(2 * ttl)
	if !leader.leads() || other.leads() || other.starts.Load() != 0 {
		t.Errorf("leader leads: %v; other leads: %v, started %d times", leader.leads(), other.leads(), other.starts.Load())
	}
	if m := all.most.Load(); m != 1 {
		t.Errorf("%d processes led at once", m)
	}
}

// A leader that dies (its connection cut, the key never deleted) is
// replaced once the lease expires, and it stops what it ran itself: it
// cannot renew.
func TestDeadLeaderIsReplacedAfterTheTTL(t *testing.T) {
	var all leading
	leader, other := twoContenders(t, leaseTTL, &all)
	leader.node.kill()
	waitFor(t, "the other process to lead", other.leads)
	waitFor(t, "the dead leader to stop leading", func() bool { return !leader.leads() && leader.stops.Load() == 1 })
	if m := all.most.Load(); m != 1 {
		t.Errorf("%d processes led at once", m)
	}
}

// A leader that shuts down deletes the key: the other process takes over
// without waiting for the expiry (a minute here, longer than waitFor).
func TestReleasedLeaseIsTakenOverAtOnce(t *testing.T) {
	var all leading
	leader, other := twoContenders(t, time.Minute, &all)
	if err := leader.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if leader.stops.Load() != 1 || leader.lease.Leading() {
		t.Error("the leader did not stop what it ran before Run returned")
	}
	waitFor(t, "the other process to lead", other.leads)
}

// A renewal refused because the key changed (another process wrote it)
// stops the holder at once; it competes again and leads once the foreign
// value expires.
func TestRefusedRenewalStopsTheHolder(t *testing.T) {
	const ttl = time.Second
	var all leading
	srv := natsfake.Start(t, t.TempDir())
	n := startNode(t, "a", testConfig(srv.URL()), Roles{})
	c := compete(t, n, ttl, &all)
	waitFor(t, "a leader", c.leads)

	ctx := context.Background()
	kv, err := n.bus.js.KeyValue(ctx, n.bus.n.leaseBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, leaseKey, []byte("someone else")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the holder to stop", func() bool { return c.stops.Load() == 1 })
	waitFor(t, "the holder to lead again after the foreign value expired", func() bool { return c.starts.Load() == 2 && c.leads() })
	if e, err := kv.Get(ctx, leaseKey); err != nil || string(e.Value()) != c.lease.holder {
		t.Errorf("the key holds %v (%v), want the holder %q", e, err, c.lease.holder)
	}
}

// A lead function that fails ends Run with its error, and the lease is
// released for another process.
func TestFailingLeadEndsRunAndReleases(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	n := startNode(t, "a", testConfig(srv.URL()), Roles{})
	boom := errors.New("jobs file unreadable")
	err := n.bus.Lease(leaseKey, time.Minute).Run(context.Background(), func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want %v", err, boom)
	}
	var all leading
	c := compete(t, n, time.Minute, &all)
	waitFor(t, "another holder at once", c.leads)
}
