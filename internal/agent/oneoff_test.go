package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// publish sends m as it is (tests of the fields senders like the API set).
func (h *harness) publish(m bus.InboundMessage) {
	h.t.Helper()
	if m.Channel == "" {
		m.Channel = "test"
	}
	if m.SenderID == "" {
		m.SenderID = "u1"
	}
	if err := h.bus.PublishInbound(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

func TestModelOfTheMessageIsUsedForItsTurnOnly(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "smart answer"}, fakellm.Reply{Text: "default answer"})
	h.publish(bus.InboundMessage{ChatID: "c1", Content: "hi", Model: "smart"})
	h.waitFinals("c1", 1)
	h.publish(bus.InboundMessage{ChatID: "c1", Content: "again"})
	h.waitFinals("c1", 2)
	reqs := h.script.Requests()
	if reqs[0].Model != "gpt-4.1" || reqs[1].Model != "gpt-4o-mini" {
		t.Fatalf("models = %q, %q; want gpt-4.1 for the turn that asked, then the default", reqs[0].Model, reqs[1].Model)
	}
	if snap, _ := h.store.Get("test:c1"); snap.Route != "" {
		t.Errorf("the message's model was persisted as the session route %q", snap.Route)
	}
}

func TestFinalCarriesTheTurnsSummedUsage(t *testing.T) {
	h := newHarness(t)
	h.writeFile("notes.md", "buy milk")
	h.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c", Name: "read_file", Args: `{"path":"notes.md"}`}}, InputTokens: 100, OutputTokens: 10},
		fakellm.Reply{Text: "milk", InputTokens: 150, OutputTokens: 5},
	)
	h.send("c1", "notes?")
	f := h.waitFinals("c1", 1)[0]
	if f.Usage.InputTokens != 250 || f.Usage.OutputTokens != 15 {
		t.Fatalf("final usage = %+v, want 250 in / 15 out", f.Usage)
	}
}

func TestHistorySeedsANewSessionAndIsIgnoredAfterwards(t *testing.T) {
	h := newHarness(t)
	history := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("old topic")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("old answer")}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("/new")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("New conversation started.")}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("my name is Ann")}},
		{Role: llm.RoleSystem, Parts: []llm.Part{llm.Text("client system prompt")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Hello Ann")}},
	}
	h.script.Push(fakellm.Reply{Text: "You are Ann."}, fakellm.Reply{Text: "Still Ann."})
	h.publish(bus.InboundMessage{ChatID: "c1", Content: "who am I?", History: history})
	h.waitFinals("c1", 1)
	snap, _ := h.store.Get("test:c1")
	var texts []string
	for _, m := range snap.Messages {
		texts = append(texts, string(m.Role)+":"+m.Text())
	}
	if len(snap.Messages) != 4 || texts[0] != "user:my name is Ann" || texts[1] != "assistant:Hello Ann" ||
		!strings.HasSuffix(texts[2], "who am I?") || texts[3] != "assistant:You are Ann." {
		t.Fatalf("session = %q; want the history after /new (no system message), then the turn", texts)
	}
	if got := h.script.Requests()[0].Messages; len(got) != 3 || got[0].Text != "my name is Ann" {
		t.Errorf("the model did not see the seeded history: %+v", got)
	}

	// The session has messages now: a re-sent (even different) history is ignored.
	h.publish(bus.InboundMessage{ChatID: "c1", Content: "and now?", History: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("something else entirely")}},
	}})
	h.waitFinals("c1", 2)
	snap, _ = h.store.Get("test:c1")
	if len(snap.Messages) != 6 || !strings.HasSuffix(snap.Messages[4].Text(), "and now?") {
		t.Fatalf("session has %d messages, want 6 (history ignored): %+v", len(snap.Messages), snap.Messages)
	}
}

func TestEphemeralTurnLeavesNothingAndIsNeverACommand(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "Commands are for chats."})
	h.publish(bus.InboundMessage{ChatID: "once", SessionKey: "test:once", Content: "/help", Ephemeral: true,
		History: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("earlier")}}}})
	f := h.waitFinals("once", 1)[0]
	if f.Content != "Commands are for chats." || f.IsError {
		t.Fatalf("final = %+v; /help in a one-off turn goes to the model", f)
	}
	req := h.script.Requests()[0]
	if len(req.Messages) != 2 || req.Messages[0].Text != "earlier" || !strings.HasSuffix(req.LastUserText(), "/help") {
		t.Errorf("model saw %+v; want the re-sent history then the message", req.Messages)
	}
	if slices.Contains(req.Tools, SpawnToolName) || !slices.Contains(req.Tools, "read_file") {
		t.Errorf("tools offered = %v; a one-off turn gets no spawn", req.Tools)
	}
	if snap, _ := h.store.Get("test:once"); len(snap.Messages) != 0 {
		t.Errorf("the store holds %d messages of a one-off turn", len(snap.Messages))
	}
	if files, _ := filepath.Glob(filepath.Join(h.ws, "sessions", "*")); len(files) != 0 {
		t.Errorf("session files after a one-off turn: %v", files)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "sessions")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(h.ws, "sessions"))
		if len(entries) != 0 {
			t.Errorf("sessions/ is not empty: %v", entries)
		}
	}
}

func TestEphemeralTurnRefusesSpawnByName(t *testing.T) {
	h := newHarness(t)
	h.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "s", Name: SpawnToolName, Args: `{"task":"later"}`}}},
		fakellm.Reply{Text: "done"},
	)
	h.publish(bus.InboundMessage{ChatID: "once", SessionKey: "test:once2", Content: "spawn", Ephemeral: true})
	h.waitFinals("once", 1)
	res := h.script.Requests()[1].Messages[2].ToolResults
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "one-off") {
		t.Fatalf("spawn result in a one-off turn = %+v", res)
	}
}
