package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
)

func isSubagentCall(r fakellm.Request) bool { return strings.Contains(r.System, "# nanobot subagent") }

func isAnnouncement(r fakellm.Request) bool {
	return !isSubagentCall(r) && strings.Contains(r.LastUserText(), "[System message, not written by the user")
}

// noLeaks checks, after every cleanup of the test (register it first), that
// the goroutines the test started have ended.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// stubTool stands in for a tool subagents must not have (cron).
type stubTool struct{ name string }

func (s stubTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: s.name, Description: "stub", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func (s stubTool) Run(context.Context, tools.Invocation) (tools.Result, error) {
	return tools.Result{Text: s.name + " ran"}, nil
}

func TestSpawnAnnouncesResultForTheMainAgentToSummarise(t *testing.T) {
	noLeaks(t)
	h := newHarness(t)
	if err := h.reg.Register(stubTool{"cron"}); err != nil {
		t.Fatal(err)
	}
	var subCalls atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		switch {
		case isSubagentCall(r):
			switch subCalls.Add(1) {
			case 1: // tries what it must not have, and something it may use
				return fakellm.Reply{ToolCalls: []fakellm.Call{
					{ID: "m", Name: "message", Args: `{"content":"raw progress"}`},
					{ID: "c", Name: "cron", Args: `{}`},
					{ID: "s", Name: "spawn", Args: `{"task":"recurse"}`},
					{ID: "l", Name: "list_dir", Args: `{"path":"."}`},
				}}
			default:
				return fakellm.Reply{Text: "RAW RESULT: the answer is 42, found in notes.md"}
			}
		case isAnnouncement(r):
			return fakellm.Reply{Text: "Good news: the background research found that the answer is 42."}
		case len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults) > 0:
			return fakellm.Reply{Text: "I started a background task for that."}
		}
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "sp", Name: "spawn", Args: `{"task":"Find the answer in the workspace notes.","label":"find the answer"}`}}}
	}
	h.writeFile("notes.md", "42")
	h.send("c1", "please research the answer")
	fs := h.waitFinals("c1", 2)
	if fs[0].Content != "I started a background task for that." {
		t.Errorf("first final = %q", fs[0].Content)
	}
	if fs[1].Content != "Good news: the background research found that the answer is 42." || fs[1].IsError {
		t.Errorf("announcement turn's final = %+v", fs[1])
	}
	for _, m := range h.rec.All() {
		if strings.Contains(m.Content, "RAW RESULT") || strings.Contains(m.Content, "raw progress") || strings.Contains(m.Content, "list_dir") {
			t.Errorf("subagent output reached the chat: %+v", m)
		}
	}

	var sub []fakellm.Request
	var announce fakellm.Request
	for _, r := range h.script.Requests() {
		if isSubagentCall(r) {
			sub = append(sub, r)
		}
		if isAnnouncement(r) {
			announce = r
		}
	}
	if len(sub) != 2 {
		t.Fatalf("%d subagent model calls, want 2", len(sub))
	}
	for _, banned := range []string{"message", "spawn", "cron"} {
		if slices.Contains(sub[0].Tools, banned) {
			t.Errorf("subagent was offered %s: %v", banned, sub[0].Tools)
		}
	}
	if !slices.Contains(sub[0].Tools, "read_file") || sub[0].LastUserText() != "Find the answer in the workspace notes." {
		t.Errorf("subagent tools %v, task %q", sub[0].Tools, sub[0].LastUserText())
	}
	results := sub[1].Messages[len(sub[1].Messages)-1].ToolResults
	if len(results) != 4 || !results[0].IsError || !results[1].IsError || !results[2].IsError || results[3].IsError ||
		!strings.Contains(results[0].Content, "unknown tool") || !strings.Contains(results[3].Content, "notes.md") {
		t.Errorf("subagent tool results = %+v", results)
	}
	if !strings.Contains(announce.LastUserText(), "RAW RESULT: the answer is 42") || !strings.Contains(announce.LastUserText(), "find the answer") {
		t.Errorf("announcement = %q", announce.LastUserText())
	}
	// The session holds the main agent's turns only: the spawn turn and the
	// announcement turn, never the subagent's own steps.
	snap := h.snapshot("test:c1")
	if len(snap.Messages) != 6 {
		t.Fatalf("session has %d messages, want 6", len(snap.Messages))
	}
	for _, m := range snap.Messages {
		for _, c := range m.ToolCalls() {
			if c.Name != "spawn" {
				t.Errorf("subagent step %s leaked into the session", c.Name)
			}
		}
	}
	// The usage ledger counts the chat's turn, the subagent's own calls and
	// the announcement turn, each under its origin.
	if o := h.origins(); o[usage.OriginTurn] == 0 || o[usage.OriginSubagent] < 2 {
		t.Errorf("calls by origin %v: want the turn's and the subagent's (its own and the announcement)", o)
	}
}

func TestSubagentIterationCapAndLimits(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, func(c *Config) { c.SubagentIterations = 3; c.MaxSubagentsPerSession = 1 })
	var subCalls atomic.Int32
	// The subagent waits until both spawn calls ran, so the first one is
	// still running when the second asks.
	spawned := make(chan struct{})
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		switch {
		case isSubagentCall(r):
			<-spawned
			subCalls.Add(1)
			return fakellm.Reply{Text: "still looking", ToolCalls: []fakellm.Call{{ID: "l", Name: "list_dir", Args: `{"path":"."}`}}}
		case isAnnouncement(r):
			return fakellm.Reply{Text: "summary of an unfinished task"}
		case len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults) > 0:
			close(spawned)
			return fakellm.Reply{Text: "started"}
		}
		return fakellm.Reply{ToolCalls: []fakellm.Call{
			{ID: "a", Name: "spawn", Args: `{"task":"loop forever"}`},
			{ID: "b", Name: "spawn", Args: `{"task":"a second one"}`},
		}}
	}
	h.send("c1", "go")
	h.waitFinals("c1", 2)
	if n := subCalls.Load(); n != 3 {
		t.Errorf("subagent made %d model calls, want the cap of 3", n)
	}
	var first fakellm.Request
	for _, r := range h.script.Requests() {
		if !isSubagentCall(r) && len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults) == 2 {
			first = r
		}
	}
	results := first.Messages[len(first.Messages)-1].ToolResults
	if len(results) != 2 || results[0].IsError || !results[1].IsError || !strings.Contains(results[1].Content, "already has 1 background tasks") {
		t.Errorf("the per-session cap should refuse the second spawn: %+v", results)
	}
	var announce string
	for _, r := range h.script.Requests() {
		if isAnnouncement(r) {
			announce = r.LastUserText()
		}
	}
	if !strings.Contains(announce, "stopped after 3 steps") || !strings.Contains(announce, "still looking") {
		t.Errorf("announcement = %q", announce)
	}
}

func TestStopCancelsSubagents(t *testing.T) {
	noLeaks(t)
	h := newHarness(t)
	var subStarted atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		switch {
		case isSubagentCall(r):
			subStarted.Add(1)
			return fakellm.Reply{Text: "never finishes", Delay: time.Hour}
		case isAnnouncement(r):
			t.Error("a cancelled subagent must not be announced")
			return fakellm.Reply{Text: "?"}
		case len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults) > 0:
			return fakellm.Reply{Text: "started"}
		}
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "a", Name: "spawn", Args: `{"task":"slow work","label":"slow"}`}}}
	}
	h.turn("c1", "start something slow")
	h.until("subagent running", func() bool { return subStarted.Load() == 1 })
	// The turn's final is out before its session goes idle; only then is
	// the subagent the one thing /stop can stop.
	h.until("session idle", func() bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		return h.agent.active["test:c1"] == nil
	})
	if !strings.Contains(h.command("c1", "/status"), "Background tasks running: 1") {
		t.Error("/status should count the running subagent")
	}
	if r := h.command("c1", "/stop"); !strings.Contains(r, "Stopped") || !strings.Contains(r, "Cancelled 1 background task") {
		t.Errorf("/stop = %q", r)
	}
	h.until("subagent gone", func() bool { return h.agent.subs.running("test:c1") == 0 })
	if r := h.command("c1", "/stop"); r != "Nothing is running." {
		t.Errorf("second /stop = %q", r)
	}
}

func TestSubagentsCancelledOnShutdown(t *testing.T) {
	noLeaks(t)
	h := newHarness(t)
	var subStarted atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		switch {
		case isSubagentCall(r):
			subStarted.Add(1)
			return fakellm.Reply{Text: "never finishes", Delay: time.Hour}
		case len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults) > 0:
			return fakellm.Reply{Text: "started"}
		}
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "a", Name: "spawn", Args: `{"task":"slow work"}`}}}
	}
	h.turn("c1", "start something slow")
	h.until("subagent running", func() bool { return subStarted.Load() == 1 })
	// The harness's cleanup closes intake and waits for Run; Run must
	// cancel the subagent rather than wait an hour for it (noLeaks checks
	// its goroutine ended).
}

// command sends a command and returns the next standalone message in chat
// that answers it.
func (h *harness) command(chat, cmd string) string {
	h.t.Helper()
	before := len(h.messagesOfKind(chat, bus.KindMessage))
	h.send(chat, cmd)
	h.waitFor(cmd, func([]bus.OutboundMessage) bool { return len(h.messagesOfKind(chat, bus.KindMessage)) > before })
	return h.messagesOfKind(chat, bus.KindMessage)[before].Content
}

func TestModelReadsBuiltinSkill(t *testing.T) {
	h := newHarness(t)
	location := regexp.MustCompile(`<name>weather</name>.*?<location>([^<]+)</location>`)
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if last := r.Messages[len(r.Messages)-1]; len(last.ToolResults) > 0 {
			return fakellm.Reply{Text: "done"}
		}
		// Like a model would: find the skill's location in the prompt and read it.
		m := location.FindStringSubmatch(r.System)
		if m == nil {
			t.Errorf("weather skill not listed in the system prompt:\n%s", r.System)
			return fakellm.Reply{Text: "no skill"}
		}
		args, _ := json.Marshal(map[string]string{"path": m[1]})
		return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "r", Name: "read_file", Args: string(args)}}}
	}
	h.turn("c1", "what's the weather in Lisbon?")
	reqs := h.script.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	if !strings.Contains(reqs[0].System, "# Active Skills\n\n### memory") {
		t.Error("the always-on memory skill's body is not in the system prompt")
	}
	res := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults
	if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content, "wttr.in") {
		t.Fatalf("reading the built-in skill failed: %+v", res)
	}

	// A workspace skill of the same name replaces the built-in one.
	h.writeFile("skills/weather/SKILL.md", "---\nname: weather\ndescription: Read my weather station.\n---\nRead station.csv.")
	h.turn("c1", "and now?")
	reqs = h.script.Requests()
	res = reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].ToolResults
	if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content, "Read station.csv.") {
		t.Errorf("the workspace override was not read: %+v", res)
	}
}
