package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// recordedUser is a user message as the agent persists it for message id.
func recordedUser(text string, ids ...string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(text)}, Meta: &llm.Meta{MessageIDs: ids}}
}

func assistant(text string, calls ...llm.ToolCall) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant, Meta: &llm.Meta{Provider: "openai", Model: "m", StopReason: "stop"}}
	if text != "" {
		m.Parts = append(m.Parts, llm.Text(text))
	}
	for _, c := range calls {
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolCall, Call: &c})
	}
	return m
}

func toolResult(id, name, content string) llm.Message {
	return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult,
		Result: &llm.ToolResult{ToolCallID: id, Name: name, Content: llm.Content{Live: content}}}}}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// A message redelivered after a crash (the channel never got its ack) is
// recognised by its id in the session: resumed, answered again, or left
// alone — never a second user message, never a second model answer.
func TestRedeliveredMessage(t *testing.T) {
	tests := []struct {
		name     string
		session  []llm.Message // what the crashed process left
		replies  []fakellm.Reply
		wantSent string // the KindMessage re-sent, if any
		final    string
		roles    string // the session afterwards
		calls    int    // model calls
	}{
		{
			name:    "crash before the model answered: the turn resumes",
			session: []llm.Message{recordedUser("[ctx]\nwhat time is it?", "q1")},
			replies: []fakellm.Reply{{Text: "Noon."}},
			final:   "Noon.", roles: "user,assistant", calls: 1,
		},
		{
			name: "crash between tool steps: the turn resumes after them",
			session: []llm.Message{
				recordedUser("[ctx]\nlist the files", "q1"),
				assistant("", call("c1", "list_dir", `{"path":"."}`)),
				toolResult("c1", "list_dir", "notes.md"),
			},
			replies: []fakellm.Reply{{Text: "There is notes.md."}},
			final:   "There is notes.md.", roles: "user,assistant,tool,assistant", calls: 1,
		},
		{
			name:     "crash before the answer was delivered: it is sent again",
			session:  []llm.Message{recordedUser("[ctx]\nhi", "q1"), assistant("Hello there!")},
			wantSent: "Hello there!",
			roles:    "user,assistant",
		},
		{
			// See docs/reliability.md#every-turn-ends-with-something-to-read.
			// A final after a message-tool note was sent the first time too
			// (this row said "nothing is sent again" before).
			name: "a final after a message-tool note: the final is sent again",
			session: []llm.Message{
				recordedUser("[ctx]\nremind me", "q1"),
				assistant("", call("m1", "message", `{"content":"Reminder!"}`)),
				toolResult("m1", "message", "sent"),
				assistant("I sent it."),
			},
			wantSent: "I sent it.",
			roles:    "user,assistant,tool,assistant",
		},
		{
			name: "a final repeating the message tool's text: nothing is sent again",
			session: []llm.Message{
				recordedUser("[ctx]\nremind me", "q1"),
				assistant("", call("m1", "message", `{"content":"Reminder!"}`)),
				toolResult("m1", "message", "sent"),
				assistant(" Reminder!\n"),
			},
			roles: "user,assistant,tool,assistant",
		},
		{
			name: "taken up by a later turn: nothing more",
			session: []llm.Message{
				recordedUser("[ctx]\nfirst", "q1"),
				recordedUser("[ctx]\nsecond", "q2"),
				assistant("Both answered."),
			},
			roles: "user,user,assistant",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.store.Append("test:c1", tt.session...); err != nil {
				t.Fatal(err)
			}
			h.script.Push(tt.replies...)
			h.sendID("c1", "q1", "(redelivered)")
			f := h.waitFinals("c1", 1)[0]
			if f.Content != tt.final || f.IsError {
				t.Errorf("final = %q (error %v), want %q", f.Content, f.IsError, tt.final)
			}
			var sent []string
			for _, m := range h.messagesOfKind("c1", bus.KindMessage) {
				sent = append(sent, m.Content)
			}
			if strings.Join(sent, "|") != tt.wantSent {
				t.Errorf("re-sent = %q, want %q", sent, tt.wantSent)
			}
			snap, _ := h.store.Get("test:c1")
			if got := roles(snap.Messages); got != tt.roles {
				t.Errorf("session roles = %s, want %s", got, tt.roles)
			}
			if n := len(h.script.Requests()); n != tt.calls {
				t.Errorf("%d model calls, want %d", n, tt.calls)
			}
			h.mu.Lock()
			acks := h.acked["q1"]
			h.mu.Unlock()
			if acks != 1 {
				t.Errorf("acked %d times, want 1", acks)
			}
		})
	}
}

// A resumed turn continues the stored history: the model sees the old user
// message (and the tool steps already made) and no copy of it.
func TestResumedTurnSendsTheStoredHistory(t *testing.T) {
	h := newHarness(t)
	if _, err := h.store.Append("test:c1",
		recordedUser("[ctx]\nlist the files", "q1"),
		assistant("", call("c1", "list_dir", `{"path":"."}`)),
		toolResult("c1", "list_dir", "notes.md"),
	); err != nil {
		t.Fatal(err)
	}
	h.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c1", Name: "list_dir", Args: `{"path":"."}`}}}, fakellm.Reply{Text: "done"})
	h.sendID("c1", "q1", "(redelivered)")
	h.waitFinals("c1", 1)
	req := h.script.Requests()[0]
	if len(req.Messages) != 3 || !strings.HasSuffix(req.Messages[0].Text, "list the files") || req.Messages[2].ToolResults[0].CallID != "c1" {
		t.Fatalf("resumed request = %+v", req.Messages)
	}
	snap, _ := h.store.Get("test:c1")
	if calls := snap.Messages[3].ToolCalls(); len(calls) != 1 || calls[0].ID == "c1" {
		t.Errorf("the resumed turn reused the interrupted turn's call id: %+v", calls)
	}
}

// /stop settles a message for good (acknowledged); a shutdown that cuts a
// turn short does not, so the channel asks again after the restart.
func TestStopAcknowledgesShutdownDoesNot(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "slow", Delay: time.Minute})
	h.send("c1", "long task")
	for len(h.script.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.send("c1", "/stop")
	h.waitFinals("c1", 1)
	h.mu.Lock()
	stoppedAcks := h.acked["long task"]
	h.mu.Unlock()
	if stoppedAcks != 1 {
		t.Errorf("stopped message acked %d times, want 1", stoppedAcks)
	}

	h.script.Push(fakellm.Reply{Text: "slow", Delay: time.Minute})
	h.send("c2", "cut by shutdown")
	for len(h.script.Requests()) < 2 {
		time.Sleep(time.Millisecond)
	}
	h.cancel() // shutdown after the grace period: running turns are cancelled
	h.waitFinals("c2", 1)
	h.mu.Lock()
	cutAcks := h.acked["cut by shutdown"]
	h.mu.Unlock()
	if cutAcks != 0 {
		t.Errorf("a turn cut short by shutdown was acknowledged %d times; it must be asked again", cutAcks)
	}
}

// sendID publishes a message with an explicit platform id.
func (h *harness) sendID(chat, id, content string) {
	h.t.Helper()
	m := bus.InboundMessage{Channel: "test", ChatID: chat, SenderID: "u1", MessageID: id, Content: content,
		Ack: func() {
			h.mu.Lock()
			h.acked[id]++
			h.mu.Unlock()
		}}
	if err := h.bus.PublishInbound(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

func roles(msgs []llm.Message) string {
	r := make([]string, len(msgs))
	for i, m := range msgs {
		r[i] = string(m.Role)
	}
	return strings.Join(r, ",")
}
