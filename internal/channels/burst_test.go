package channels

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// burstRig runs a Manager on a bus the way the gateway does, with an
// instant "agent": every chat's turn publishes its start and its final at
// once, waiting for room on the bus like the agent does (a final is never
// given up for back-pressure).
type burstRig struct {
	b     *bus.Bus
	m     *Manager
	ch    *countingChannel
	stop  func()
	wg    sync.WaitGroup // the simulated turns
	acked sync.Map       // chat → *atomic.Int32, Delivered calls
}

func newBurstRig(tb testing.TB, cfg ManagerConfig, log *zap.Logger) *burstRig {
	r := &burstRig{b: bus.New(64), ch: &countingChannel{sent: map[string]int{}}}
	r.m = NewManager(r.b.Outbound(), cfg, log)
	if err := r.m.Register(r.ch, testRenderer{limit: 4096}, config.OutputConfig{}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.m.Run(ctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			r.wg.Wait()
			r.b.CloseOutbound()
			if err := <-done; err != nil {
				tb.Errorf("Run: %v", err)
			}
			cancel()
		})
	}
	tb.Cleanup(r.stop)
	return r
}

// burst starts one instant turn in each of n new chats named prefix-i.
func (r *burstRig) burst(prefix string, n int) {
	for i := range n {
		chat := fmt.Sprintf("%s-%d", prefix, i)
		acks := new(atomic.Int32)
		r.acked.Store(chat, acks)
		r.wg.Go(func() {
			ctx := context.Background()
			turn := "t-" + chat
			_ = r.b.PublishOutbound(ctx, bus.OutboundMessage{Channel: "count", ChatID: chat, Kind: bus.KindStart, TurnID: turn})
			_ = r.b.PublishOutbound(ctx, bus.OutboundMessage{Channel: "count", ChatID: chat, Kind: bus.KindFinal, TurnID: turn,
				Content: "answer " + chat, Delivered: func() { acks.Add(1) }})
		})
	}
}

// countingChannel counts the answers each chat received; it is instant.
type countingChannel struct {
	mu    sync.Mutex
	sent  map[string]int
	total int
	last  time.Time
	got   chan struct{} // signalled on each send, when set
}

func (c *countingChannel) Name() string                  { return "count" }
func (c *countingChannel) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (c *countingChannel) Send(_ context.Context, m Outgoing) (Sent, error) {
	c.mu.Lock()
	c.sent[m.ChatID]++
	c.total++
	c.last = time.Now()
	c.mu.Unlock()
	if c.got != nil {
		select {
		case c.got <- struct{}{}:
		default:
		}
	}
	return Sent{ChatID: m.ChatID, MessageID: "1"}, nil
}
func (c *countingChannel) Typing(context.Context, string, map[string]string) error { return nil }
func (c *countingChannel) TypingInterval() time.Duration                           { return 4 * time.Second }

func (c *countingChannel) answered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// eventually polls cond until it holds or 10 s pass (a bound on a hang,
// not a timing claim).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling an async condition, not timing
	}
}

// Bursts of 1×, 2× and 10× MaxChats new chats are every one answered exactly
// once, without the idle timeout passing (the clock is fake and never
// moves until the end): past the cap, idle workers retire at once and
// parked chats take their places, so no chat waits for another. Moving the
// clock past IdleTimeout then returns the goroutines to their baseline.
func TestBurstsPastMaxChatsAnswerEveryChatOnce(t *testing.T) {
	const maxChats = 8
	for _, mult := range []int{1, 2, 10} {
		t.Run(fmt.Sprintf("%dx", mult), func(t *testing.T) {
			clk := clock.NewFake()
			baseline := runtime.NumGoroutine()
			r := newBurstRig(t, ManagerConfig{MaxChats: maxChats, IdleTimeout: time.Minute, Clock: clk}, zaptest.NewLogger(t))
			n := mult * maxChats
			r.burst("c", n)
			eventually(t, fmt.Sprintf("%d answers", n), func() bool { return r.ch.answered() >= n })
			r.wg.Wait()
			eventually(t, "every answer acknowledged", func() bool {
				done := 0
				r.acked.Range(func(_, v any) bool {
					if v.(*atomic.Int32).Load() > 0 {
						done++
					}
					return true
				})
				return done == n
			})
			r.ch.mu.Lock()
			var wrong []string
			for i := range n {
				chat := fmt.Sprintf("c-%d", i)
				if r.ch.sent[chat] != 1 {
					wrong = append(wrong, fmt.Sprintf("%s:%d", chat, r.ch.sent[chat]))
				}
			}
			r.ch.mu.Unlock()
			r.acked.Range(func(k, v any) bool {
				if a := v.(*atomic.Int32).Load(); a != 1 {
					wrong = append(wrong, fmt.Sprintf("%s acked %d times", k, a))
				}
				return true
			})
			slices.Sort(wrong)
			if len(wrong) > 0 {
				t.Fatalf("chats not answered exactly once: %v", wrong)
			}
			if w, p := r.m.Workers(), r.m.Parked(); w > maxChats || p != 0 {
				t.Fatalf("workers = %d (cap %d), parked = %d after the burst", w, maxChats, p)
			}
			// Idle workers go once IdleTimeout passed; so do their goroutines.
			clk.Advance(time.Minute)
			eventually(t, "idle workers reaped", func() bool { return r.m.Workers() == 0 })
			r.stop()
			eventually(t, fmt.Sprintf("goroutines back to the baseline %d", baseline), func() bool {
				return runtime.NumGoroutine() <= baseline
			})
		})
	}
}

// BenchmarkBurstLastAnswer measures, for bursts of 1×, 2× and 10× the
// default MaxChats (1,024) new chats with an instant agent and an instant
// platform, the delay from the burst's first message to its last answer
// (ms-last-answer, the median over the iterations). Each iteration uses
// new chats, so the workers of the previous burst are idle, not reaped: the
// cap is reached from the 1× burst's second iteration on.
//
//	go test ./internal/channels/ -run '^$' -bench BurstLastAnswer -benchtime 5x
func BenchmarkBurstLastAnswer(b *testing.B) {
	const maxChats = 1024
	for _, mult := range []int{1, 2, 10} {
		b.Run(fmt.Sprintf("%dx", mult), func(b *testing.B) {
			r := newBurstRig(b, ManagerConfig{MaxChats: maxChats}, zap.NewNop())
			n := mult * maxChats
			var delays []float64
			iter := 0
			for b.Loop() {
				want := r.ch.answered() + n
				start := time.Now()
				r.burst(fmt.Sprintf("i%d", iter), n)
				r.wg.Wait()
				for r.ch.answered() < want {
					time.Sleep(100 * time.Microsecond)
				}
				r.ch.mu.Lock()
				delays = append(delays, float64(r.ch.last.Sub(start).Microseconds())/1000)
				r.ch.mu.Unlock()
				iter++
			}
			slices.Sort(delays)
			b.ReportMetric(delays[len(delays)/2], "ms-last-answer")
			b.ReportMetric(0, "ns/op")
		})
	}
}
