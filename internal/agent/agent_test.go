package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestSimpleTurnPersistsAndReplies(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "Hello! How can I help?"})
	h.send("c1", "hi there")
	f := h.waitFinals("c1", 1)[0]
	if f.Content != "Hello! How can I help?" || f.IsError {
		t.Fatalf("final = %+v", f)
	}
	if f.ReplyTo != "hi there" || f.TurnID == "" {
		t.Errorf("final not tied to the message/turn: %+v", f)
	}
	if starts := h.messagesOfKind("c1", bus.KindStart); len(starts) != 1 || starts[0].TurnID != f.TurnID {
		t.Errorf("want one start for the turn, got %+v", starts)
	}
	if drafts := h.messagesOfKind("c1", bus.KindDraft); len(drafts) == 0 || !strings.HasPrefix(f.Content, drafts[len(drafts)-1].Content) {
		t.Errorf("drafts should grow towards the final text: %+v", drafts)
	}
	snap, err := h.store.Get("test:c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Messages) != 2 || snap.Messages[0].Role != llm.RoleUser || snap.Messages[1].Text() != "Hello! How can I help?" {
		t.Fatalf("session = %+v", snap.Messages)
	}
	if !strings.Contains(snap.Messages[0].Text(), "hi there") || !strings.HasPrefix(snap.Messages[0].Text(), "[") {
		t.Errorf("user message should carry the context prefix and the text: %q", snap.Messages[0].Text())
	}
	if m := snap.Messages[1].Meta; m == nil || m.Provider != "openai" || m.Model != "gpt-4o-mini" || m.Usage.OutputTokens == 0 {
		t.Errorf("assistant meta = %+v", m)
	}
	h.mu.Lock()
	acks := h.acked["hi there"]
	h.mu.Unlock()
	if acks != 1 {
		t.Errorf("message acked %d times, want 1", acks)
	}
	req := h.script.Requests()[0]
	if !strings.Contains(req.System, "# nanobot") || strings.Contains(req.System, "hi there") {
		t.Errorf("system prompt wrong: %.200s", req.System)
	}
}

func TestToolTurnAndHistory(t *testing.T) {
	h := newHarness(t)
	h.writeFile("notes.md", "buy milk")
	h.script.Push(
		fakellm.Reply{Text: "Let me look.", ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path":"notes.md"}`}}},
		fakellm.Reply{Text: "Your note says: buy milk."},
	)
	h.send("c1", "what do my notes say?")
	if f := h.waitFinals("c1", 1)[0]; f.Content != "Your note says: buy milk." {
		t.Fatalf("final = %q", f.Content)
	}
	if st := h.messagesOfKind("c1", bus.KindStatus); len(st) != 1 || !strings.Contains(st[0].Content, "read_file notes.md") {
		t.Errorf("status hints = %+v", st)
	}
	snap, _ := h.store.Get("test:c1")
	roles := []llm.Role{}
	for _, m := range snap.Messages {
		roles = append(roles, m.Role)
	}
	if len(snap.Messages) != 4 || snap.Messages[1].ToolCalls()[0].Name != "read_file" ||
		!strings.Contains(snap.Messages[2].ToolResults()[0].Content.Live, "buy milk") || snap.Messages[3].Text() == "" {
		t.Fatalf("session roles %v: %+v", roles, snap.Messages)
	}
	// The second request carried the tool result.
	reqs := h.script.Requests()
	if n := len(reqs[1].Messages); n != 3 || reqs[1].Messages[2].ToolResults[0].CallID != "call_1" {
		t.Errorf("second call did not see the tool result: %+v", reqs[1].Messages)
	}

	// A second turn sends the earlier turn as history.
	h.script.Push(fakellm.Reply{Text: "You're welcome."})
	h.send("c1", "thanks")
	h.waitFinals("c1", 2)
	last := h.script.Requests()[2]
	if len(last.Messages) != 5 || !strings.Contains(last.Messages[0].Text, "what do my notes say?") {
		t.Errorf("history not sent: %d messages", len(last.Messages))
	}
}

func TestProviderFailureIsNotPersisted(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "partial answer", Truncate: true})
	h.send("c1", "hello")
	f := h.waitFinals("c1", 1)[0]
	if !f.IsError || !strings.Contains(f.Content, "cut off") {
		t.Fatalf("final = %+v", f)
	}
	snap, _ := h.store.Get("test:c1")
	if len(snap.Messages) != 1 || snap.Messages[0].Role != llm.RoleUser {
		t.Fatalf("failed call poisoned the session: %+v", snap.Messages)
	}
	h.script.Push(fakellm.Reply{Status: 401, ErrorMessage: "bad key"})
	h.send("c1", "again")
	if f := h.waitFinals("c1", 2)[1]; !f.IsError || !strings.Contains(f.Content, "API key") {
		t.Errorf("auth failure message = %q", f.Content)
	}
}

func TestInvalidToolArgumentsGetAnErrorResult(t *testing.T) {
	h := newHarness(t)
	h.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "a", Name: "read_file", Args: `{"path": "x`}, {ID: "b", Name: "no_such_tool", Args: `{}`}}},
		fakellm.Reply{Text: "sorry"},
	)
	h.send("c1", "go")
	h.waitFinals("c1", 1)
	results := h.script.Requests()[1].Messages[2].ToolResults
	if len(results) != 2 || !results[0].IsError || !results[1].IsError ||
		!strings.Contains(results[0].Content, "JSON") || !strings.Contains(results[1].Content, "no_such_tool") {
		t.Fatalf("results = %+v", results)
	}
}

func TestIterationLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxToolIterations = 3 })
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "x", Name: "list_dir", Args: `{"path":"."}`}}}
	}
	h.send("c1", "loop forever")
	f := h.waitFinals("c1", 1)[0]
	if !strings.Contains(f.Content, "3 tool steps") {
		t.Fatalf("final = %q", f.Content)
	}
	if n := len(h.script.Requests()); n != 3 {
		t.Errorf("model called %d times, want 3", n)
	}
	snap, _ := h.store.Get("test:c1")
	seen := map[string]bool{}
	for _, m := range snap.Messages {
		for _, c := range m.ToolCalls() {
			if seen[c.ID] {
				t.Errorf("tool call id %s repeated in one turn", c.ID)
			}
			seen[c.ID] = true
		}
	}
	if last := snap.Messages[len(snap.Messages)-1]; last.Meta == nil || !last.Meta.Synthetic {
		t.Errorf("limit note not persisted as a synthetic message: %+v", last)
	}
}

func TestStopCancelsRunningTurn(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "this takes forever", Delay: time.Minute})
	h.send("c1", "long task")
	h.waitFor("turn start", func(out []bus.OutboundMessage) bool { return len(out) > 0 && out[0].Kind == bus.KindStart })
	for len(h.script.Requests()) == 0 {
		time.Sleep(time.Millisecond) // the model call is in flight once recorded
	}
	h.send("c1", "/stop")
	out := h.waitFor("stopped", func(out []bus.OutboundMessage) bool {
		for _, m := range out {
			if m.Kind == bus.KindMessage && strings.Contains(m.Content, "Stopped") {
				return true
			}
		}
		return false
	})
	f := h.waitFinals("c1", 1)[0]
	if f.Content != "" || f.IsError {
		t.Errorf("cancelled turn's final should be empty: %+v (all: %+v)", f, out)
	}
	snap, _ := h.store.Get("test:c1")
	if len(snap.Messages) != 1 {
		t.Errorf("a cancelled turn left %d messages, want only the user message", len(snap.Messages))
	}
}

// /stop cancels the running turn; a message queued behind it is neither
// dropped nor left waiting: it is answered next, told that the previous
// answer was stopped, and saved (docs/sessions.md#stop).
func TestStopAnswersWhatWasQueued(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "this takes forever", Delay: time.Minute})
	h.send("c1", "long task")
	for len(h.script.Requests()) == 0 {
		time.Sleep(time.Millisecond) // the model call is in flight once recorded
	}
	h.send("c1", "no, the short version")
	h.waitFor("queued", func([]bus.OutboundMessage) bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		q := h.agent.active["test:c1"]
		return q != nil && len(q.pending) == 1
	})
	h.script.Push(fakellm.Reply{Text: "Short version."})
	h.send("c1", "/stop")
	fs := h.waitFinals("c1", 2)
	h.waitFor("the stop reply", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Stopped") })
	if fs[0].Content != "" || fs[1].Content != "Short version." {
		t.Errorf("finals = %q, %q; want the stopped turn's empty one, then the answer", fs[0].Content, fs[1].Content)
	}
	var stopReply string
	for _, m := range h.messagesOfKind("c1", bus.KindMessage) {
		stopReply += m.Content
	}
	if want := "⏹ Stopped. I'll answer the message you sent meanwhile now."; stopReply != want {
		t.Errorf("/stop replied %q, want %q", stopReply, want)
	}
	text := h.script.Requests()[1].LastUserText()
	if !strings.Contains(text, stoppedNote) || !strings.HasSuffix(text, "\nno, the short version") {
		t.Errorf("the queued message reached the model as %q", text)
	}
	snap, _ := h.store.Get("test:c1")
	var texts []string
	for _, m := range snap.Messages {
		texts = append(texts, string(m.Role)+": "+m.Text())
	}
	if len(snap.Messages) != 3 || !strings.HasSuffix(texts[0], "long task") || !strings.HasSuffix(texts[1], "no, the short version") ||
		texts[2] != "assistant: Short version." {
		t.Errorf("session = %q; want both messages and the answer", texts)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range []string{"long task", "no, the short version", "/stop"} {
		if h.acked[m] != 1 {
			t.Errorf("%q acked %d times, want 1", m, h.acked[m])
		}
	}
}

func TestBurstBecomesOneFollowUpTurn(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var calls atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 1 {
			<-release
		}
		return fakellm.Reply{Text: "ok " + r.LastUserText()}
	}
	h.send("c1", "first")
	for len(h.script.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.send("c1", "second")
	h.send("c1", "third")
	// Both are queued behind the running turn before it is released.
	h.waitFor("queued", func([]bus.OutboundMessage) bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		q := h.agent.active["test:c1"]
		return q != nil && len(q.pending) == 2
	})
	once.Do(func() { close(release) })
	fs := h.waitFinals("c1", 2)
	if !strings.Contains(fs[1].Content, "second") || !strings.Contains(fs[1].Content, "third") {
		t.Fatalf("follow-up turn did not merge the burst: %q", fs[1].Content)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("model called %d times, want 2", n)
	}
}

func TestSessionsRunInParallelUnderTheCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConcurrentTurns = 2 })
	var inFlight, peak atomic.Int32
	gate := make(chan struct{})
	var gateOnce sync.Once
	t.Cleanup(func() { gateOnce.Do(func() { close(gate) }) })
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		inFlight.Add(-1)
		return fakellm.Reply{Text: "done"}
	}
	for _, c := range []string{"a", "b", "c", "d"} {
		h.send(c, "go")
	}
	for peak.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	gateOnce.Do(func() { close(gate) })
	for _, c := range []string{"a", "b", "c", "d"} {
		h.waitFinals(c, 1)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrent turns = %d, want 2 (the cap)", p)
	}
}

// TestMessageToolAndFinalText: a message-tool note does not swallow the
// final answer; only a final that repeats what the tool sent to this chat
// in this turn is left out
// (docs/reliability.md#every-turn-ends-with-something-to-read). It replaces
// TestMessageToolSuppressesFinalText, which locked in the swallowing.
func TestMessageToolAndFinalText(t *testing.T) {
	note := func(id, chat, content string) fakellm.Call {
		args := fmt.Sprintf(`{"content":%q}`, content)
		if chat != "" {
			args = fmt.Sprintf(`{"content":%q,"chat_id":%q}`, content, chat)
		}
		return fakellm.Call{ID: id, Name: "message", Args: args}
	}
	tests := []struct {
		name  string
		calls []fakellm.Call
		final string
		want  string
	}{
		{"a progress note, then the answer", []fakellm.Call{note("m", "", "working on it")}, "The answer is 42.", "The answer is 42."},
		{"the answer sent by the tool, then repeated", []fakellm.Call{note("m", "", "Here is your reminder.")}, "  Here is your\nreminder. ", ""},
		{"the answer sent by the tool, then nothing more", []fakellm.Call{note("m", "", "Here is your reminder.")}, "", ""},
		{"two notes, the final repeats the first", []fakellm.Call{note("m1", "", "first"), note("m2", "", "second")}, "first", ""},
		{"a note sent to the same chat by id", []fakellm.Call{note("m", "c1", "done")}, "done", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.script.Push(fakellm.Reply{ToolCalls: tt.calls}, fakellm.Reply{Text: tt.final})
			h.send("c1", "remind me")
			f := h.waitFinals("c1", 1)[0]
			if f.Content != tt.want || f.IsError {
				t.Errorf("final = %q (error %v), want %q", f.Content, f.IsError, tt.want)
			}
			if ms := h.messagesOfKind("c1", bus.KindMessage); len(ms) != len(tt.calls) {
				t.Errorf("message tool output = %+v", ms)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "first answer"})
	h.send("c1", "hello")
	h.waitFinals("c1", 1)

	reply := func(cmd string) string {
		t.Helper()
		before := len(h.messagesOfKind("c1", bus.KindMessage))
		h.send("c1", cmd)
		out := h.waitFor(cmd, func([]bus.OutboundMessage) bool { return len(h.messagesOfKind("c1", bus.KindMessage)) > before })
		_ = out
		ms := h.messagesOfKind("c1", bus.KindMessage)
		return ms[before].Content
	}
	if r := reply("/help"); !strings.Contains(r, "/new") || !strings.Contains(r, "/stop") {
		t.Errorf("/help = %q", r)
	}
	if r := reply("/status"); !strings.Contains(r, "openai/gpt-4o-mini") || !strings.Contains(r, "2 messages") || !strings.Contains(r, "Version: test") {
		t.Errorf("/status = %q", r)
	}
	if r := reply("/model"); !strings.Contains(r, "smart") || !strings.Contains(r, "(current)") {
		t.Errorf("/model = %q", r)
	}
	if r := reply("/model nonsense"); !strings.Contains(r, "don't know") {
		t.Errorf("/model nonsense = %q", r)
	}
	if r := reply("/model smart"); !strings.Contains(r, "smart") {
		t.Errorf("/model smart = %q", r)
	}
	h.script.Push(fakellm.Reply{Text: "smart answer"})
	h.send("c1", "question")
	h.waitFinals("c1", 2)
	if reqs := h.script.Requests(); reqs[len(reqs)-1].Model != "gpt-4.1" {
		t.Errorf("route switch not used: model %q", reqs[len(reqs)-1].Model)
	}
	if r := reply("/whoami"); !strings.Contains(r, "u1") {
		t.Errorf("/whoami = %q", r)
	}
	h.script.Push(saveMemory("[2025-01-01 10:00] Asked a question.", "# Memory\n"))
	h.send("c1", "/new")
	h.waitFor("/new", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Started a new conversation") })
	snap, _ := h.store.Get("test:c1")
	if len(snap.Messages) != 0 {
		t.Errorf("/new did not start fresh: %d messages", len(snap.Messages))
	}
	// The chat's model is the chat's choice: it outlives /new, and a
	// restart (a store reading the files afresh) keeps it too.
	if snap.Route != "smart" {
		t.Errorf("/new forgot the chat's model: route %q, want smart", snap.Route)
	}
	restarted := session.NewStore(filepath.Join(h.ws, "sessions"), session.Options{}, zaptest.NewLogger(t))
	defer func() { _ = restarted.Close() }()
	if snap, err := restarted.Get("test:c1"); err != nil || snap.Route != "smart" {
		t.Errorf("after a restart: route %q (%v), want smart", snap.Route, err)
	}
	h.script.Push(fakellm.Reply{Text: "still smart"})
	h.send("c1", "after new")
	h.waitFinals("c1", 3)
	if reqs := h.script.Requests(); reqs[len(reqs)-1].Model != "gpt-4.1" {
		t.Errorf("after /new the chat went to model %q, want its chosen gpt-4.1", reqs[len(reqs)-1].Model)
	}
}

func TestQueueOverflowDropsOldest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxQueue = 2 })
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var calls atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 1 {
			<-release
		}
		return fakellm.Reply{Text: "got " + r.LastUserText()}
	}
	h.send("c1", "m0")
	for len(h.script.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		h.send("c1", m)
	}
	h.waitFor("drop notice", func(out []bus.OutboundMessage) bool {
		for _, m := range out {
			if m.Kind == bus.KindMessage && strings.Contains(m.Content, "skipped") {
				return true
			}
		}
		return false
	})
	once.Do(func() { close(release) })
	fs := h.waitFinals("c1", 2)
	if strings.Contains(fs[1].Content, "m1") || !strings.Contains(fs[1].Content, "m3") || !strings.Contains(fs[1].Content, "m4") {
		t.Errorf("follow-up = %q, want m3 and m4 only", fs[1].Content)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range []string{"m0", "m1", "m2", "m3", "m4"} {
		if h.acked[m] != 1 {
			t.Errorf("%s acked %d times, want exactly 1 (dropped ones are acked too)", m, h.acked[m])
		}
	}
}

func TestShutdownCancellation(t *testing.T) {
	tests := []struct {
		name       string
		redelivers bool // the channel acknowledges, so it brings the message back after a restart
	}{
		{"channel without redelivery tells the user", false},
		{"redelivering channel stays silent and does not acknowledge", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.script.Push(fakellm.Reply{Text: "never", Delay: time.Minute})
			m := bus.InboundMessage{Channel: "test", ChatID: "c1", SenderID: "u1", MessageID: "m1", Content: "long task"}
			acked := 0
			if tt.redelivers {
				m.Ack = func() { acked++ }
			}
			if err := h.bus.PublishInbound(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			for len(h.script.Requests()) == 0 {
				time.Sleep(time.Millisecond)
			}
			h.cancel() // as the daemon does when the grace period is over
			f := h.waitFinals("c1", 1)[0]
			if tt.redelivers {
				if f.Content != "" || f.Delivered != nil {
					t.Errorf("final = %+v, want empty and unacknowledged", f)
				}
			} else if !f.IsError || !strings.Contains(f.Content, "restarted") {
				t.Errorf("final after a shutdown cancellation = %+v", f)
			}
			snap, _ := h.store.Get("test:c1")
			if len(snap.Messages) != 1 || snap.Messages[0].Role != llm.RoleUser {
				t.Errorf("session after cancellation: %+v", snap.Messages)
			}
			if acked != 0 {
				t.Errorf("acknowledged %d times", acked)
			}
		})
	}
}

// A goroutine waiting for the next session's work does not hold up the end
// of Run, which waits for every goroutine it started: it leaves when Run
// ends. (The wait is made an hour long; the harness's cleanup closes the
// inbound channel and fails the test if Run has not returned within 10 s.)
func TestRunEndsWithoutWaitingForSpareGoroutines(t *testing.T) {
	h := newHarness(t)
	h.agent.spareIdle = time.Hour
	h.script.Push(fakellm.Reply{Text: "one"}, fakellm.Reply{Text: "two"})
	h.send("c1", "hello")
	h.waitFinals("c1", 1)
	h.send("c2", "hello again")
	h.waitFinals("c2", 1)
}
