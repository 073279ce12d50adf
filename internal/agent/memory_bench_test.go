package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

// windowModel is a Model that only knows its context window.
type windowModel struct{ Model }

func (windowModel) ContextWindow(string) int { return 128000 }
func (windowModel) Default() string          { return "openai/gpt-4o-mini" }
func (windowModel) Complete(context.Context, string, llm.Request, func(llm.Delta)) (llm.Message, error) {
	panic("not called")
}

// window100 is a full memory window of 100 messages with a 4 KB tool
// result in every other turn.
func window100() []llm.Message {
	var msgs []llm.Message
	for range 25 {
		call := llm.ToolCall{ID: "c", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.md"}`)}
		res := llm.ToolResult{ToolCallID: "c", Name: "read_file", Content: llm.PlainContent(strings.Repeat("a line of a file in the workspace\n", 120))}
		res.Content = history.Detail(call, res)
		msgs = append(msgs,
			llm.NewText(llm.RoleUser, "please look at my notes and tell me what is due this week"),
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Let me read them."), {Kind: llm.PartToolCall, Call: &call}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &res}}},
			llm.NewText(llm.RoleAssistant, "Due this week: the dentist on Friday and the tax form on Sunday."),
		)
	}
	return msgs
}

// BenchmarkNeedsConsolidation measures the check after every turn.
// cold estimates the whole unconsolidated part (the first turn of a session
// after a start); turn is the usual case, where the tally already covers
// the session and the turn added four messages.
func BenchmarkNeedsConsolidation(b *testing.B) {
	msgs := window100()
	b.Run("cold", func(b *testing.B) {
		a := New(defaultConfig("", "bench"), Deps{Model: windowModel{}}, nil)
		snap := session.Snapshot{Key: "k", Messages: msgs}
		b.ReportAllocs()
		for b.Loop() {
			a.tallies.forget("k")
			if a.needsConsolidation(snap) {
				b.Fatal("100 messages should not trigger a window of 100")
			}
		}
	})
	b.Run("turn", func(b *testing.B) {
		a := New(defaultConfig("", "bench"), Deps{Model: windowModel{}}, nil)
		tallied := a.tallies.tokens(session.Snapshot{Key: "k", Messages: msgs[:96]})
		after := session.Snapshot{Key: "k", Messages: msgs}
		b.ReportAllocs()
		for b.Loop() {
			a.tallies.m["k"] = tally{to: 96, n: tallied}
			if a.needsConsolidation(after) {
				b.Fatal("100 messages should not trigger a window of 100")
			}
		}
	})
}

func TestTalliesMatchAFullCount(t *testing.T) {
	old := window100()
	var fresh []llm.Message // a new session file after /new, with other messages
	for i := range 100 {
		fresh = append(fresh, llm.NewText(llm.RoleUser, strings.Repeat("short ", i%7+1)))
	}
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name         string
		msgs         []llm.Message
		created      time.Time
		consolidated int
		len          int
	}{
		{"first turn", old, created, 0, 4},
		{"archived: the new file is already longer", fresh, created.Add(time.Second), 0, 8},
		{"grows", fresh, created.Add(time.Second), 0, 40},
		{"grows again", fresh, created.Add(time.Second), 0, 100},
		{"offset moved", fresh, created.Add(time.Second), 48, 100},
	}
	var ts tallies
	for _, s := range steps {
		want := 0
		for _, m := range s.msgs[s.consolidated:s.len] {
			want += history.Estimate(m)
		}
		snap := session.Snapshot{Key: "k", Created: s.created, Consolidated: s.consolidated, Messages: s.msgs[:s.len]}
		if got := ts.tokens(snap); got != want {
			t.Errorf("%s: tally %d, full count %d", s.name, got, want)
		}
	}
}
