package natsbus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// NATS restarting while a process looks up its consumers (Setup done, Run
// not yet serving) does not end Run: the lookup waits for NATS to come
// back. It used to fail once and end Run ("consumer test_in_12: context
// deadline exceeded"), leaving the process without a bus; under load
// TestNATSRestartLosesNothing restarted NATS inside that window.
func TestConsumerLookupWaitsOutANATSRestart(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	core, logs := observer.New(zap.WarnLevel)
	b := New(cfg, Options{Roles: Roles{Agent: true, Channels: true}, Name: "w"}, bus.New(1), zap.New(core))
	nc, err := connect(cfg, "w", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Setup(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	type found struct {
		ins []jetstream.Consumer
		out jetstream.Consumer
		err error
	}
	done := make(chan found, 1)
	go func() {
		ins, out, err := b.consumersRetrying(ctx, js)
		done <- found{ins, out, err}
	}()
	waitFor(t, "a lookup to fail while NATS is down", func() bool {
		select {
		case f := <-done:
			t.Fatalf("the lookup gave up while NATS was down: %v", f.err)
		default:
		}
		return logs.FilterMessage("nats: cannot look up the consumers yet; retrying").Len() > 0
	})
	srv.Restart()
	f := <-done // ctx bounds it
	if f.err != nil || len(f.ins) != cfg.Partitions || f.out == nil {
		t.Fatalf("after the restart: %d inbound consumers, outbound %v, err %v; want %d, one, none", len(f.ins), f.out, f.err, cfg.Partitions)
	}
}

// Once Run has ended its connection is closed for good: a publish then
// fails at its first attempt instead of retrying for publishFor (two
// minutes), as it does across a reconnect. A stopping process's last
// acknowledgements held its shutdown that long.
func TestPublishAfterRunDoesNotRetry(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	core, logs := observer.New(zap.DebugLevel)
	b := New(testConfig(srv.URL()), Options{Roles: Roles{Channels: true}, Name: "c"}, bus.New(1), zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	waitFor(t, "the bus ready", func() bool { return b.Healthy() == nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := b.publish(context.Background(), b.n.inSubject(0), []byte("late")); err == nil {
		t.Fatal("a publish after Run ended succeeded")
	}
	if n := logs.FilterMessage("nats: publish failed; retrying").Len(); n != 0 {
		t.Errorf("a publish on the closed connection was retried %d times", n)
	}
}
