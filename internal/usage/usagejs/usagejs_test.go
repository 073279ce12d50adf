package usagejs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/usage/usagejs"
)

var cfg = config.NATSConfig{Prefix: "nbtest"}

func connect(t *testing.T, srv *natsfake.Server) natsbus.JetStreamer {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil })
}

// process is one gateway process: its own ledger dir and connection.
type process struct {
	ledger *usage.Ledger
	shared *usagejs.Shared
	stop   func()
}

func start(t *testing.T, srv *natsfake.Server, dir, worker string) *process {
	t.Helper()
	l, err := usage.Open(dir, usage.Options{Prices: usage.NewPriceTable(nil), SyncEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := usagejs.New(cfg, connect(t, srv), l, worker, 0, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	p := &process{ledger: l, shared: s}
	p.stop = func() { cancel(); wg.Wait(); _ = l.Close() }
	return p
}

func calls(t *testing.T, l *usage.Ledger) int64 {
	t.Helper()
	rep, err := l.Query(usage.Query{Period: usage.Today(l.Now(), l.Location())})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Total.Calls
}

// poll waits for cond, failing after a generous bound (never a timing
// claim: the condition either comes true or the test fails).
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEveryWorkersCallsLandInEveryLedger: two processes record their own
// calls; each ledger counts both, once; a restart reads on from where it
// stopped without counting anything twice.
func TestEveryWorkersCallsLandInEveryLedger(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	dirA, dirB := t.TempDir(), t.TempDir()
	a := start(t, srv, dirA, "worker-a")
	b := start(t, srv, dirB, "worker-b")
	ctx := context.Background()
	rec := func(chat string) usage.Record {
		return usage.Record{Chat: chat, Origin: usage.OriginTurn, Provider: "openai", Model: "gpt-4o", Tokens: llm.Usage{OutputTokens: 100_000}}
	}
	for range 3 {
		if err := a.shared.Record(ctx, rec("telegram:1")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := b.shared.Record(ctx, rec("telegram:2")); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls(t, a.ledger); n < 3 {
		t.Errorf("a counts %d calls right after making 3", n)
	}
	poll(t, "both ledgers to count 5 calls", func() bool { return calls(t, a.ledger) == 5 && calls(t, b.ledger) == 5 })
	if sp := b.ledger.Spent(usage.Scope{Chat: "telegram:1"}); sp.Day.String() != "$3" {
		t.Errorf("b sees telegram:1 spend %s, want a's $3", sp.Day)
	}

	// b stops; a records more; b starts again and catches up, once.
	b.stop()
	_ = a.shared.Record(ctx, rec("telegram:1"))
	b = start(t, srv, dirB, "worker-b")
	poll(t, "b to catch up", func() bool { return calls(t, b.ledger) == 6 })
	_ = b.shared.Record(ctx, rec("telegram:2"))
	poll(t, "a to see b's new call", func() bool { return calls(t, a.ledger) == 7 })
	if n := calls(t, b.ledger); n != 7 {
		t.Errorf("b counts %d, want 7 (nothing twice)", n)
	}
	a.stop()
	b.stop()
}
