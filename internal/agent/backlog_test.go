package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// A backlog a channel hands over at once (a catch-up after a restart) is
// answered in one turn: no turn starts on a message marked More while the
// rest is on its way, however slowly it comes; and a backlog whose last
// message never comes (the channel dropped it) is still answered, after
// the bounded wait.
func TestBacklogIsAnsweredAsOneTurn(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		msgs []bus.InboundMessage
		// turns is the last user text of each model request, in order.
		turns []string
		// together: the one turn's message holds every message.
		together bool
	}{
		{name: "three messages, the last unmarked: one turn",
			wait:  time.Minute,
			msgs:  []bus.InboundMessage{{Content: "first", More: true}, {Content: "second", More: true}, {Content: "third"}},
			turns: []string{"third"}, together: true},
		{name: "the rest never comes: answered after the wait",
			wait:  50 * time.Millisecond,
			msgs:  []bus.InboundMessage{{Content: "alone", More: true}},
			turns: []string{"alone"}},
		{name: "unmarked messages are not held",
			wait:  time.Minute,
			msgs:  []bus.InboundMessage{{Content: "one"}},
			turns: []string{"one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.agent.backlogWait = tt.wait
			for range tt.turns {
				h.script.Push(fakellm.Reply{Text: "ok"})
			}
			for i, m := range tt.msgs {
				if i > 0 {
					// Slower than a channel ever is: a turn started on
					// a message marked More would be seen here.
					time.Sleep(100 * time.Millisecond)
				}
				m.Channel, m.ChatID, m.SenderID, m.MessageID = "test", "c1", "u1", m.Content
				if err := h.bus.PublishInbound(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			h.waitFinals("c1", len(tt.turns))
			var got []string
			for _, r := range h.script.Requests() {
				last := r.LastUserText()
				got = append(got, last[strings.LastIndex(last, "\n")+1:])
			}
			if strings.Join(got, "|") != strings.Join(tt.turns, "|") {
				t.Errorf("model asked about %q, want %q", got, tt.turns)
			}
			if tt.together {
				text := h.script.Requests()[0].LastUserText()
				for _, m := range tt.msgs {
					if !strings.Contains(text, m.Content) {
						t.Errorf("the turn's message %q lacks %q", text, m.Content)
					}
				}
			}
		})
	}
}
