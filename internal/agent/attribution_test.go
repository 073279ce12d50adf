package agent

import (
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// TestMergedMessageKeepsEachAuthor: a burst merged into one user message
// names each part's author and time when more than one person wrote it, and
// reads as one message when one person did (docs/sessions.md#a-busy-chat).
func TestMergedMessageKeepsEachAuthor(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	msg := func(id, name, text string, ago time.Duration) bus.InboundMessage {
		return bus.InboundMessage{Channel: "telegram", ChatID: "-100", SenderID: id, SenderName: name, Content: text, Time: now.Add(-ago)}
	}
	tests := []struct {
		name  string
		batch []bus.InboundMessage
		want  string
	}{
		{"one message", []bus.InboundMessage{msg("1", "@bob", "hi", time.Minute)},
			"[Tue 2026-12-01 15:00 UTC · telegram · chat -100 · from @bob]\nhi"},
		{"a burst from one person reads as one message", []bus.InboundMessage{msg("1", "@bob", "a", 2*time.Minute), msg("1", "@bob", "b", time.Minute)},
			"[Tue 2026-12-01 15:00 UTC · telegram · chat -100 · from @bob]\na\nb"},
		{"two people: who asked what, oldest first", []bus.InboundMessage{
			msg("1", "@bob", "what is the capital of France?", 2*time.Minute),
			msg("2", "@alice", "and of Spain?", time.Minute)},
			"[Tue 2026-12-01 15:00 UTC · telegram · chat -100 · 2 messages from 2 people, oldest first]\n" +
				"[@bob · 14:58]\nwhat is the capital of France?\n[@alice · 14:59]\nand of Spain?"},
		{"a shared name gets the id; a nameless sender its id", []bus.InboundMessage{
			msg("1", "Alex", "x", 3*time.Minute), msg("2", "Alex", "y", 2*time.Minute), msg("3", "", "z", time.Minute)},
			"[Tue 2026-12-01 15:00 UTC · telegram · chat -100 · 3 messages from 3 people, oldest first]\n" +
				"[Alex (id 1) · 14:57]\nx\n[Alex (id 2) · 14:58]\ny\n[user 3 · 14:59]\nz"},
		{"a message from another day says which", []bus.InboundMessage{
			msg("1", "@bob", "old", 2*time.Minute+24*time.Hour), msg("2", "@alice", "new", time.Minute)},
			"[Tue 2026-12-01 15:00 UTC · telegram · chat -100 · 2 messages from 2 people, oldest first]\n" +
				"[@bob · Mon 2026-11-30 14:58]\n[sent 1d0h ago, at Mon 2026-11-30 14:58 UTC; this answer comes late]\nold\n[@alice · 14:59]\nnew"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{cfg: Config{MaxInputChars: 1000}, now: func() time.Time { return now }}
			m, err := a.userMessage(tt.batch, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Text(); got != tt.want {
				t.Errorf("user message:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
