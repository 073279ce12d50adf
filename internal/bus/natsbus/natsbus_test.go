package natsbus

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

func testConfig(url string) config.NATSConfig {
	return config.NATSConfig{URL: url, Prefix: "test", Partitions: 16, AckWait: time.Second}
}

// node is one process's side of the bus: its NATS bus and local queues.
type node struct {
	name  string
	bus   *Bus
	local *bus.Bus
	stop  func()
}

func startNode(t *testing.T, name string, cfg config.NATSConfig, roles Roles) *node {
	t.Helper()
	local := bus.New(256)
	b := New(cfg, Options{Roles: roles, Capacity: 4, Name: name}, local, zaptest.NewLogger(t).Named(name))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	n := &node{name: name, bus: b, local: local}
	n.stop = func() {
		once.Do(func() {
			local.CloseInbound()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
			local.CloseOutbound()
		})
	}
	t.Cleanup(n.stop)
	waitFor(t, name+" ready", func() bool { return b.Healthy() == nil })
	return n
}

// kill cuts a node off like kill -9 would: the connection goes without a
// word to the server, so nothing it held is handed back.
func (n *node) kill() {
	n.bus.nc.Close()
	n.stop()
}

// ledger records what the simulated agents did.
type ledger struct {
	mu     sync.Mutex
	active map[string]string // session → worker in a turn for it
	seen   map[string][]int  // session → sequence numbers handled, in order
	by     map[string]int    // worker → messages handled
	errs   []string
	finals map[string][]string // chat → final contents, in arrival order
}

func newLedger() *ledger {
	return &ledger{active: map[string]string{}, seen: map[string][]int{}, by: map[string]int{}, finals: map[string][]string{}}
}

func (l *ledger) errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// work plays the agent on a worker: each message is a turn that answers
// with the message's content, acknowledged when the answer is stored.
func (l *ledger) work(t *testing.T, n *node) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { n.stop(); wg.Wait() })
	wg.Go(func() {
		for m := range n.local.Inbound() {
			key := m.Key()
			l.mu.Lock()
			if other, busy := l.active[key]; busy {
				l.errs = append(l.errs, fmt.Sprintf("%s: %s took a message while %s was in a turn", key, n.name, other))
			}
			l.active[key] = n.name
			seq, _ := strconv.Atoi(m.MessageID)
			l.seen[key] = append(l.seen[key], seq)
			l.by[n.name]++
			l.mu.Unlock()
			runtime.Gosched()
			l.mu.Lock()
			delete(l.active, key)
			l.mu.Unlock()
			err := n.bus.PublishOutbound(context.Background(), bus.OutboundMessage{
				Channel: m.Channel, ChatID: m.ChatID, Kind: bus.KindFinal, Content: m.MessageID, Delivered: m.Ack,
			})
			if err != nil {
				l.errorf("%s: publish answer: %v", n.name, err)
			}
		}
	})
}

// deliver plays the channel manager on the channels node.
func (l *ledger) deliver(t *testing.T, n *node) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { n.stop(); wg.Wait() })
	wg.Go(func() {
		for m := range n.local.Outbound() {
			if m.Kind != bus.KindFinal {
				continue
			}
			l.mu.Lock()
			l.finals[m.ChatID] = append(l.finals[m.ChatID], m.Content)
			l.mu.Unlock()
			if m.Delivered != nil {
				m.Delivered()
			}
		}
	})
}

func (l *ledger) finalCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.finals {
		n += len(f)
	}
	return n
}

func (l *ledger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Error(e)
	}
}

func publish(t *testing.T, n *node, chat string, seq int) {
	t.Helper()
	acked := make(chan struct{})
	err := n.bus.PublishInbound(context.Background(), bus.InboundMessage{
		Channel: "telegram", ChatID: chat, MessageID: strconv.Itoa(seq), Content: "hello " + strconv.Itoa(seq),
		Ack: func() { close(acked) },
	})
	if err != nil {
		t.Errorf("publish %s/%d: %v", chat, seq, err)
		return
	}
	select {
	case <-acked:
	default:
		t.Errorf("publish %s/%d returned before the channel's Ack was called", chat, seq)
	}
}

func TestOrderPerChatAcrossWorkers(t *testing.T) {
	const chats, perChat = 100, 5
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	l := newLedger()
	front := startNode(t, "channels", cfg, Roles{Channels: true})
	l.deliver(t, front)
	workers := make([]*node, 3)
	for i := range workers {
		workers[i] = startNode(t, fmt.Sprintf("worker%d", i), cfg, Roles{Agent: true})
		l.work(t, workers[i])
	}
	var wg sync.WaitGroup
	for c := range chats {
		wg.Go(func() {
			for s := range perChat {
				publish(t, front, strconv.Itoa(c), s)
			}
		})
	}
	wg.Wait()
	waitFor(t, "every message answered", func() bool { return l.finalCount() >= chats*perChat })
	l.check(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range chats {
		key := "telegram:" + strconv.Itoa(c)
		want := []int{0, 1, 2, 3, 4}
		if got := l.seen[key]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s handled %v, want %v", key, got, want)
		}
		if got := l.finals[strconv.Itoa(c)]; fmt.Sprint(got) != "[0 1 2 3 4]" {
			t.Errorf("chat %d got answers %v, want [0 1 2 3 4]", c, got)
		}
	}
	for _, w := range workers {
		if l.by[w.name] == 0 {
			t.Errorf("%s handled nothing (%v)", w.name, l.by)
		}
	}
	t.Logf("messages per worker: %v", l.by)
}

func TestKilledWorkerMessageTakenOverOnce(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	// Heartbeats go every third of ack_wait; held twice that long, the
	// message is redelivered only if one is late by two thirds of it. 3 s
	// puts that out of reach of a loaded machine's stalls (1 s did not).
	cfg.AckWait = 3 * time.Second
	front := startNode(t, "channels", cfg, Roles{Channels: true})
	l := newLedger()
	l.deliver(t, front)
	doomed := startNode(t, "doomed", cfg, Roles{Agent: true})
	publish(t, front, "7", 0)
	var m bus.InboundMessage
	select {
	case m = <-doomed.local.Inbound():
	case <-time.After(10 * time.Second):
		t.Fatal("the only worker never got the message")
	}
	// A turn longer than ack_wait: the heartbeats keep the message here,
	// so a worker that joins meanwhile does not get it.
	took := time.Now()
	survivor := startNode(t, "survivor", cfg, Roles{Agent: true})
	waitFor(t, "twice ack_wait", func() bool { return time.Since(took) > 2*cfg.AckWait })
	info, err := consumerInfo(t, doomed, partition(m.Key(), cfg.Partitions))
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.NumAckPending != 1 {
		t.Fatalf("held message: %d redelivered, %d pending acks; want 0 and 1", info.NumRedelivered, info.NumAckPending)
	}
	select {
	case m2 := <-survivor.local.Inbound():
		t.Fatalf("a message held by a live worker was redelivered: %+v", m2)
	default:
	}
	doomed.kill()
	l.work(t, survivor)
	waitFor(t, "the survivor's answer", func() bool { return l.finalCount() == 1 })
	l.check(t)
	// The survivor acknowledged it: nothing left to deliver again.
	waitFor(t, "the partition drained", func() bool {
		info, err := consumerInfo(t, survivor, partition(m.Key(), cfg.Partitions))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	if got := l.finals["7"]; len(got) != 1 {
		t.Fatalf("answers = %v, want one", got)
	}
}

func consumerInfo(t *testing.T, n *node, p int) (*jetstream.ConsumerInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := n.bus.js.Consumer(ctx, n.bus.n.inStream(), n.bus.n.inConsumer(p))
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

func TestChannelsRestartLosesNothing(t *testing.T) {
	const msgs = 20
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	l := newLedger()
	worker := startNode(t, "worker", cfg, Roles{Agent: true})
	first := startNode(t, "channels-1", cfg, Roles{Channels: true})
	for i := range msgs {
		publish(t, first, strconv.Itoa(i), i)
	}
	// The channels process goes before the answers reach it; the stream
	// keeps them meanwhile.
	first.stop()
	l.work(t, worker)
	waitFor(t, "every message handled", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.by["worker"] == msgs
	})
	second := startNode(t, "channels-2", cfg, Roles{Channels: true})
	l.deliver(t, second)
	waitFor(t, "every answer delivered", func() bool { return l.finalCount() == msgs })
	waitFor(t, "the outbound stream drained", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := second.bus.js.Consumer(ctx, second.bus.n.outStream(), second.bus.n.outConsumer())
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	l.check(t)
	for i := range msgs {
		if got := l.finals[strconv.Itoa(i)]; len(got) != 1 {
			t.Errorf("chat %d got %v, want one answer", i, got)
		}
	}
}

func TestNATSRestartLosesNothing(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	l := newLedger()
	front := startNode(t, "channels", cfg, Roles{Channels: true})
	l.deliver(t, front)
	worker := startNode(t, "worker", cfg, Roles{Agent: true})
	l.work(t, worker)
	for i := range 10 {
		publish(t, front, "1", i)
	}
	srv.Restart()
	for i := 10; i < 20; i++ {
		publish(t, front, "1", i) // waits for the reconnect
	}
	waitFor(t, "every message answered", func() bool { return l.finalCount() >= 20 })
	l.check(t)
	var want []string
	for i := range 20 {
		want = append(want, strconv.Itoa(i))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := l.finals["1"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers = %v, want %v", got, want)
	}
}

func TestPartitionIsStable(t *testing.T) {
	// The mapping must not change between versions while messages wait in
	// the stream: pin a few values of FNV-1a.
	tests := []struct {
		key  string
		n    int
		want int
	}{
		{"telegram:42", 32, 6},
		{"a", 1, 0},
	}
	for _, tt := range tests {
		if got := partition(tt.key, tt.n); got != tt.want {
			t.Errorf("partition(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
		}
	}
}

func TestIsStop(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"/stop", true}, {"  /STOP  ", true}, {"/stop@nanobot_bot", true}, {"/stopwatch", false},
		{"please /stop", false}, {"", false},
	}
	for _, tt := range tests {
		if got := isStop(tt.in); got != tt.want {
			t.Errorf("isStop(%q) = %v", tt.in, got)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// A /stop must not wait behind the turn it stops: it goes straight to the
// worker holding the session's message, while that message is still held.
// With no turn running it travels the stream like any message.
func TestStopReachesTheWorkerRunningTheTurn(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	cfg := testConfig(srv.URL())
	front := startNode(t, "channels", cfg, Roles{Channels: true})
	idle := startNode(t, "idle", cfg, Roles{Agent: true})
	busy := startNode(t, "busy", cfg, Roles{Agent: true})
	publish(t, front, "9", 0)
	var holder, other *node
	var turn bus.InboundMessage
	select {
	case turn = <-busy.local.Inbound():
		holder, other = busy, idle
	case turn = <-idle.local.Inbound():
		holder, other = idle, busy
	case <-time.After(10 * time.Second):
		t.Fatal("no worker got the message")
	}
	acked := false
	stop := bus.InboundMessage{Channel: "telegram", ChatID: "9", MessageID: "1", Content: "/stop", Ack: func() { acked = true }}
	if err := front.bus.PublishInbound(context.Background(), stop); err != nil {
		t.Fatal(err)
	}
	if !acked {
		t.Error("the channel's /stop was not acknowledged")
	}
	select {
	case got := <-holder.local.Inbound():
		if got.Content != "/stop" {
			t.Fatalf("holder got %q, want the /stop", got.Content)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the /stop never reached the worker running the turn")
	}
	select {
	case got := <-other.local.Inbound():
		t.Fatalf("the other worker got %q", got.Content)
	default:
	}
	turn.Ack()

	// Nothing runs now: the /stop goes through the partition.
	stop.MessageID, stop.Ack = "2", nil
	if err := front.bus.PublishInbound(context.Background(), stop); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-holder.local.Inbound():
		got.Ack()
	case got := <-other.local.Inbound():
		got.Ack()
	case <-time.After(10 * time.Second):
		t.Fatal("an idle /stop was lost")
	}
}
