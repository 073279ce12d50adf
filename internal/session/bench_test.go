package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// benchTurn is one realistic turn: the user asks, the model calls a tool, the
// tool returns about 2 KB, the model answers.
func benchTurn(i int) []llm.Message {
	out := strings.Repeat("-rw-r--r-- 1 bot bot  4096 Jan  2 15:04 notes.md\n", 2048/50)
	return []llm.Message{
		llm.NewText(llm.RoleUser, fmt.Sprintf("[2026-01-02 15:04] what is in my workspace? (turn %d)", i)),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Text("Let me look."),
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "list_dir", Arguments: json.RawMessage(`{"path":"."}`)}},
		}, Meta: &llm.Meta{Provider: "openai", API: "openai", Model: "gpt-4o-mini", Usage: llm.Usage{InputTokens: 2100, OutputTokens: 20}}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{
			ToolCallID: fmt.Sprintf("call_%d", i), Name: "list_dir", Elapsed: 3 * time.Millisecond,
			Content: llm.Content{Live: out, Summary: out[:400] + "\n[… 40 lines …]", Gist: "list_dir .: ok, 40 entries"}}}}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(strings.Repeat("Your workspace holds notes and memory files. ", 10))},
			Meta: &llm.Meta{Provider: "openai", API: "openai", Model: "gpt-4o-mini", Usage: llm.Usage{InputTokens: 2600, OutputTokens: 120}}},
	}
}

// BenchmarkAppendTurn appends one turn to a loaded session of 10 and of
// 10,000 prior messages, fsync included (the cost must not depend on
// the length; see docs/sessions.md#cost-of-a-turn). The session is rebuilt
// every resetEvery turns, so "prior" stays what the name says instead of
// growing with b.N.
func BenchmarkAppendTurn(b *testing.B) { benchAppendTurn(b, (*os.File).Sync) }

// BenchmarkAppendTurnNoSync is the same with fsync disabled, to show the
// store's own cost without the disk's noise. Production always syncs.
func BenchmarkAppendTurnNoSync(b *testing.B) {
	benchAppendTurn(b, func(*os.File) error { return nil })
}

func benchAppendTurn(b *testing.B, sync func(*os.File) error) {
	for _, prior := range []int{10, 10000} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			seed := priorSession(b, prior)
			const resetEvery = 256
			var s *Store
			var syncs int // fsyncs issued while timed, reported per turn
			dir := filepath.Join(b.TempDir(), "sessions")
			fresh := func() {
				if s != nil {
					_ = s.Close()
				}
				// Reuse one directory so long runs do not fill the disk.
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				if err := os.Mkdir(dir, 0o700); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(sessionFile(dir, key), seed, 0o600); err != nil {
					b.Fatal(err)
				}
				s = NewStore(dir, withCache(Options{}), zap.NewNop())
				s.sync = func(f *os.File) error { syncs++; return sync(f) }
				if snap, err := s.Get(key); err != nil || len(snap.Messages) != prior {
					b.Fatalf("seed: %d messages, %v", len(snap.Messages), err)
				}
			}
			fresh()
			turns := make([][]llm.Message, resetEvery)
			for i := range turns {
				turns[i] = benchTurn(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			syncs = 0
			for i := 0; b.Loop(); i++ {
				if i > 0 && i%resetEvery == 0 {
					b.StopTimer()
					n := syncs
					fresh()
					syncs = n
					runtime.GC() // collect the old session now, not on the clock
					b.StartTimer()
				}
				if _, err := s.Append(key, turns[i%resetEvery]...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/op")
			_ = s.Close()
		})
	}
}

// priorSession returns the bytes of a session file holding n messages made
// of realistic turns.
func priorSession(b testing.TB, n int) []byte {
	b.Helper()
	dir := b.TempDir()
	s := NewStore(dir, withCache(Options{}), zap.NewNop())
	s.sync = func(*os.File) error { return nil }
	defer func() { _ = s.Close() }()
	var msgs []llm.Message
	for i := 0; len(msgs) < n; i++ {
		msgs = append(msgs, benchTurn(i)...)
	}
	if _, err := s.Append(key, msgs[:n]...); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(sessionFile(dir, key))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// TestAppendCostIndependentOfLength is the timing-free check that a turn's
// cost does not grow with the session (docs/sessions.md#cost-of-a-turn): a
// turn appended to a session of 10,000 messages costs not materially more
// allocations or bytes than one appended to a session of 10. A re-read, a
// rewrite or a copy of the history per turn would show up here (a copy of
// 10,000 messages alone is ~700 KB). The byte bound leaves room for the
// in-memory slice's amortised growth.
func TestAppendCostIndependentOfLength(t *testing.T) {
	type cost struct{ allocs, bytes float64 }
	costs := map[int]cost{}
	for _, prior := range []int{10, 10000} {
		dir := t.TempDir()
		writeFile(t, sessionFile(dir, key), priorSession(t, prior))
		s := newStore(t, dir, Options{}, zap.NewNop())
		s.sync = func(*os.File) error { return nil }
		if snap := must(s.Get(key)); len(snap.Messages) != prior {
			t.Fatalf("seeded %d messages, want %d", len(snap.Messages), prior)
		}
		const runs = 200
		turns := make([][]llm.Message, runs)
		for i := range turns {
			turns[i] = benchTurn(i)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, turn := range turns {
			if _, err := s.Append(key, turn...); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		costs[prior] = cost{float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs}
	}
	short, long := costs[10], costs[10000]
	t.Logf("per turn: %.1f allocs / %.0f B with 10 prior messages, %.1f allocs / %.0f B with 10,000", short.allocs, short.bytes, long.allocs, long.bytes)
	// Loose bounds: the counters are process-wide and the race detector
	// adds allocations of its own. Re-reading the history alone would add
	// over 10,000 allocations per turn, copying it ~700 KB.
	if long.allocs > 1.1*short.allocs+1 || long.bytes > 2*short.bytes {
		t.Errorf("appending to a long session costs more: %+v vs %+v", long, short)
	}
}
