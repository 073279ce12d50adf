package daemon

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
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
	measure := func() (heap uint64, goroutines int) {
		g.script.Forget()
		g.tg.Forget()
		var ms runtime.MemStats
		for range 2 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse, runtime.NumGoroutine()
	}

	runRounds()
	heap1, gor1 := measure()
	runRounds()
	heap2, gor2 := measure()
	growth := int64(heap2) - int64(heap1)
	t.Logf("after %d turns: heap in use %.1f MiB, %d goroutines; after %d: %.1f MiB (%+d KiB), %d goroutines",
		chats*rounds, float64(heap1)/(1<<20), gor1, 2*chats*rounds, float64(heap2)/(1<<20), growth/1024, gor2)
	// 1 MiB is 5 KiB per turn of the second half: room for the cached
	// sessions growing longer, far below what keeping a turn's state
	// (goroutine stack, request, drafts) would cost.
	if growth > 1<<20 {
		t.Errorf("heap grew by %d KiB over 200 turns of the same traffic", growth/1024)
	}
	if gor2 > gor1+3 {
		t.Errorf("goroutines grew from %d to %d over 200 turns", gor1, gor2)
	}
	if n := calls.Load(); n != 2*chats*rounds {
		t.Errorf("%d model calls, want %d", n, 2*chats*rounds)
	}
}
