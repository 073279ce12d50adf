package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// 10,000 prior messages, fsync included (S-S2: the cost must not depend on
// the length). The session is rebuilt every resetEvery turns, so "prior"
// stays what the name says instead of growing with b.N.
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
			dir := filepath.Join(b.TempDir(), "sessions")
			fresh := func() {
				if s != nil {
					s.Close()
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
				s = NewStore(dir, Options{}, zap.NewNop())
				s.sync = sync
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
			for i := 0; b.Loop(); i++ {
				if i > 0 && i%resetEvery == 0 {
					b.StopTimer()
					fresh()
					b.StartTimer()
				}
				if _, err := s.Append(key, turns[i%resetEvery]...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.Close()
		})
	}
}

// priorSession returns the bytes of a session file holding n messages made
// of realistic turns.
func priorSession(b *testing.B, n int) []byte {
	b.Helper()
	dir := b.TempDir()
	s := NewStore(dir, Options{}, zap.NewNop())
	s.sync = func(*os.File) error { return nil }
	defer s.Close()
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
