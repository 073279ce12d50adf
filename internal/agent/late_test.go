package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestLateNote(t *testing.T) {
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		m    bus.InboundMessage
		want string
	}{
		{"no time", bus.InboundMessage{}, ""},
		{"just now", bus.InboundMessage{Time: now.Add(-10 * time.Second)}, ""},
		{"behind a short queue", bus.InboundMessage{Time: now.Add(-4 * time.Minute)}, ""},
		{"minutes", bus.InboundMessage{Time: now.Add(-7 * time.Minute)}, "[sent 7m ago, at Mon 2026-11-23 14:53 UTC; this answer comes late]"},
		{"hours", bus.InboundMessage{Time: now.Add(-(3*time.Hour + 12*time.Minute))}, "[sent 3h12m ago, at Mon 2026-11-23 11:48 UTC; this answer comes late]"},
		{"days", bus.InboundMessage{Time: now.Add(-50 * time.Hour)}, "[sent 2d2h ago, at Sat 2026-11-21 13:00 UTC; this answer comes late]"},
		{"a job's own message", bus.InboundMessage{Time: now.Add(-time.Hour), Metadata: map[string]string{MetaSource: "cron"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lateNote(tt.m, now); got != tt.want {
				t.Errorf("lateNote = %q, want %q", got, tt.want)
			}
		})
	}
}

// A message that waited (here: sent three hours before the turn) reaches
// the model with a note saying so, between the context prefix and its text.
func TestLateMessageIsMarkedForTheModel(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "Sorry for the delay!"})
	m := bus.InboundMessage{Channel: "test", ChatID: "c1", SenderID: "u1", MessageID: "m1", Content: "are you there?",
		Time: time.Now().Add(-3 * time.Hour)}
	if err := h.bus.PublishInbound(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	h.waitFinals("c1", 1)
	text := h.script.Requests()[0].LastUserText()
	if !strings.Contains(text, "[sent 3h00m ago, at ") || !strings.HasSuffix(text, "this answer comes late]\nare you there?") {
		t.Errorf("user text:\n%s", text)
	}
}
