package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestObserverSeesEachOutcome(t *testing.T) {
	h := newHarness(t)
	h.script.Push(
		fakellm.Reply{Text: "hello"},
		fakellm.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad request"},
		fakellm.Reply{Text: "never", Delay: time.Minute},
	)
	h.send("c1", "one")
	h.waitFinals("c1", 1)
	h.send("c1", "two")
	h.waitFinals("c1", 2)
	h.send("c1", "three")
	for len(h.script.Requests()) < 3 {
		time.Sleep(time.Millisecond) // the slow call is in flight once recorded
	}
	h.send("c1", "/stop")
	h.waitFinals("c1", 3)
	h.waitFor("three outcomes", func([]bus.OutboundMessage) bool { return len(h.turnOutcomes()) == 3 })
	want := []string{OutcomeAnswered, OutcomeFailed, OutcomeStopped}
	if got := h.turnOutcomes(); !slices.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
}

// A turn cut by shutdown (Run's context ends) on a channel that does not
// redeliver keeps the user message and the finished steps, tells the user it
// was interrupted, and is reported as such, not as a /stop.
func TestShutdownInterruptsRunningTurnWithANotice(t *testing.T) {
	h := newHarness(t)
	h.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c1", Name: "list_dir", Args: `{"path":"."}`}}},
		fakellm.Reply{Text: "never", Delay: time.Minute},
	)
	// No Ack: like Discord, the channel will not bring the message back.
	if err := h.bus.PublishInbound(context.Background(), bus.InboundMessage{Channel: "test", ChatID: "c1", SenderID: "u1", MessageID: "m1", Content: "long task"}); err != nil {
		t.Fatal(err)
	}
	for len(h.script.Requests()) < 2 {
		time.Sleep(time.Millisecond) // the second call is in flight once recorded
	}
	h.cancel()
	f := h.waitFinals("c1", 1)[0]
	if !f.IsError || !strings.Contains(f.Content, "continue") {
		t.Errorf("interrupted turn's final = %+v, want the restart notice", f)
	}
	h.waitFor("outcome", func([]bus.OutboundMessage) bool { return len(h.turnOutcomes()) == 1 })
	if got := h.turnOutcomes(); got[0] != OutcomeInterrupted {
		t.Errorf("outcome = %v, want interrupted", got)
	}
	snap, err := h.store.Get("test:c1")
	if err != nil {
		t.Fatal(err)
	}
	// The user message and the finished tool step are kept; the cut call is not.
	var roles []string
	for _, m := range snap.Messages {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool" {
		t.Errorf("session after interruption = %v, want user,assistant,tool", roles)
	}
}
