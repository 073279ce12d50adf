package daemon

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// Memory and goroutines stay flat over many turns: after a warm-up the
// same traffic again (the same chats, more than the session cache holds, so
// sessions are evicted and reloaded) may grow the heap only by what the
// longer sessions legitimately hold, and leaves no goroutine behind.
// Anything kept per turn — a goroutine, a subscriber, a turn's state —
// would show up as growth proportional to the second half's 200 turns. The
// fakes run in this process too, so their logs are dropped before each
// measurement, and the gateway logs nothing (zaptest would keep every line).
func TestMemoryAndGoroutinesStayFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("400 turns")
	}
	const chats, rounds = 20, 10
	g := startWith(t, setup{quiet: true, agents: "session_cache: 4", telegram: `allow_from: ["*"]` + "\nstreaming: false"})
	var calls atomic.Int64
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		calls.Add(1)
		return echoLast(r)
	}
	round := 0
	runRounds := func() {
		for range rounds {
			round++
			for c := range chats {
				g.tg.PushMessage(telegramfake.DM(int64(1000+c), fmt.Sprintf("round %d", round)))
			}
			for c := range chats {
				g.waitLast(int64(1000+c), fmt.Sprintf("got: round %d", round))
			}
		}
	}
	measure := func() (heap uint64, goroutines, conns int) {
		g.script.Forget()
		g.tg.Forget()
		var ms runtime.MemStats
		for range 2 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		goroutines, conns = countGoroutines(t)
		return ms.HeapInuse, goroutines, conns
	}

	runRounds()
	heap1, gor1, conn1 := measure()
	runRounds()
	heap2, gor2, conn2 := measure()
	// A turn's own goroutines and buffers may still be on their way out
	// when its reply is seen (more so on a loaded machine); what a turn
	// leaks stays. So the second look is repeated for a while until it is
	// within bounds: only growth that lasts fails the test.
	for deadline := time.Now().Add(10 * time.Second); (gor2 > gor1+3 || int64(heap2)-int64(heap1) > 1<<20) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		heap2, gor2, conn2 = measure()
	}
	growth := int64(heap2) - int64(heap1)
	t.Logf("after %d turns: heap in use %.1f MiB, %d goroutines (+%d of HTTP connections); after %d: %.1f MiB (%+d KiB), %d goroutines (+%d)",
		chats*rounds, float64(heap1)/(1<<20), gor1, conn1, 2*chats*rounds, float64(heap2)/(1<<20), growth/1024, gor2, conn2)
	// 1 MiB is 5 KiB per turn of the second half: room for the cached
	// sessions growing longer, far below what keeping a turn's state
	// (goroutine stack, request, drafts) would cost.
	if growth > 1<<20 {
		t.Errorf("heap grew by %d KiB over 200 turns of the same traffic", growth/1024)
	}
	if gor2 > gor1+3 {
		t.Errorf("goroutines grew from %d to %d over 200 turns", gor1, gor2)
	}
	// Connections kept for reuse fill their pools as the traffic's peaks
	// come (3 goroutines each: the client's read and write loops and the
	// fake's handler) and are bounded by them: the model's
	// max_concurrent_turns + 2 and Telegram's 16 idle connections, plus the
	// long poll's. A connection kept per turn would pass that within 200.
	if limit := 3 * (4 + 2 + 16 + 1); conn2 > limit {
		t.Errorf("%d goroutines of HTTP connections after 400 turns, more than the pools hold (%d)", conn2, limit)
	}
	if n := calls.Load(); n != 2*chats*rounds {
		t.Errorf("%d model calls, want %d", n, 2*chats*rounds)
	}
}

// countGoroutines counts the live goroutines, apart those of HTTP
// connections (net/http's client read and write loops, a server's
// connection handler), which the test counts separately, and the agent's
// spare goroutines and the channels' per-chat workers, which it bounds.
func countGoroutines(t *testing.T) (others, conns int) {
	const maxChatWorkers = 20 // TestMemoryAndGoroutinesStayFlat's chats
	t.Helper()
	var buf bytes.Buffer
	spares, workers := 0, 0
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	// debug=1 groups identical stacks: "N @ 0x… 0x…" then "#\t0x…\tfunc+off\tfile:line" lines.
	for _, group := range strings.Split(buf.String(), "\n\n") {
		var n int
		if _, err := fmt.Sscanf(group, "%d @", &n); err != nil {
			continue
		}
		switch {
		case strings.Contains(group, "net/http.(*persistConn).readLoop") || strings.Contains(group, "net/http.(*persistConn).writeLoop") ||
			strings.Contains(group, "net/http.(*conn).serve"):
			conns += n
		case strings.Contains(group, "channels.(*worker).run"):
			// The outbound side keeps one worker per chat until it has
			// been idle for a minute (channels.ManagerConfig.IdleTimeout):
			// on a loaded machine some of the first half's are reaped or
			// not yet started when the first look is taken. They are kept
			// per chat, not per turn, so they are bounded by the chats.
			if workers += n; workers > maxChatWorkers {
				t.Errorf("%d chat workers wait for replies, more than the test's chats (%d)", workers, maxChatWorkers)
			}
		case strings.Contains(group, "agent.(*Agent).runSession.func1") && !strings.Contains(group, "agent.(*Agent).serve"):
			// A goroutine that served a session waits a second for the
			// next (at most 8 wait): it is not kept per turn.
			if spares += n; spares > 8 {
				t.Errorf("%d goroutines wait for a session's work, more than the agent keeps (8)", spares)
			}
		default:
			others += n
		}
	}
	return others, conns
}
