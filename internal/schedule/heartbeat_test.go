package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// fakeModel answers decision calls and counts them.
type fakeModel struct {
	mu    sync.Mutex
	reqs  []llm.Request
	reply func(n int) (llm.Message, error)
}

// Complete refuses a call that does not say it is the heartbeat's, so
// every test of the heartbeat checks that its calls are counted as such
// in the usage ledger.
func (m *fakeModel) Complete(ctx context.Context, _ string, req llm.Request, _ func(llm.Delta)) (llm.Message, error) {
	if c, _ := usage.CallFrom(ctx); c.Origin != usage.OriginHeartbeat {
		return llm.Message{}, fmt.Errorf("decision call made for %+v, not the heartbeat", c)
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	return m.reply(n)
}

func (m *fakeModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

// decides returns a reply that calls the heartbeat tool with args.
func decides(args string) func(int) (llm.Message, error) {
	return func(int) (llm.Message, error) {
		return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
			Call: &llm.ToolCall{ID: "h1", Name: "heartbeat", Arguments: json.RawMessage(args)}}}}, nil
	}
}

type fakeSessions []session.Info

func (s fakeSessions) List() ([]session.Info, error) { return s, nil }

type heartbeatFixture struct {
	t     *testing.T
	ws    string
	model *fakeModel
	inbox *inbox
	hb    *Heartbeat
}

func newHeartbeatFixture(t *testing.T, tasks string, sessions fakeSessions, reply func(int) (llm.Message, error)) *heartbeatFixture {
	t.Helper()
	f := &heartbeatFixture{t: t, ws: t.TempDir(), model: &fakeModel{reply: reply}, inbox: newInbox()}
	if tasks != "" {
		if err := os.WriteFile(filepath.Join(f.ws, "HEARTBEAT.md"), []byte(tasks), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.hb = NewHeartbeat(HeartbeatConfig{Interval: config.Defaults().Gateway.Heartbeat.Interval, StatePath: filepath.Join(f.ws, "heartbeat", "state.json")},
		HeartbeatDeps{Workspace: wstest.Files(t, f.ws), Model: f.model, Bus: f.inbox, Sessions: sessions, Clock: clock.NewFake()}, zaptest.NewLogger(t))
	return f
}

const twoTasks = "# Heartbeat\n\n## Active tasks\n\n- Summarise notes/inbox.md every morning.\n- Water the plants on Sundays.\n\n## Done\n\n- Old thing.\n"

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// sessions: telegram:42 active at 10:00, discord:99 at 11:00, and the
// terminal at 11:30 (never a target).
var threeSessions = fakeSessions{
	{Key: "telegram:42", ModTime: base.Add(10 * time.Hour)},
	{Key: "discord:99", ModTime: base.Add(11 * time.Hour)},
	{Key: "cli:local", ModTime: base.Add(11*time.Hour + 30*time.Minute)},
}

func TestHeartbeatWithoutActiveTasksCallsNoModel(t *testing.T) {
	noCall := func(int) (llm.Message, error) { return llm.Message{}, errors.New("the model must not be called") }
	tests := []struct {
		name     string
		tasks    string
		sessions fakeSessions
		want     string
	}{
		{"no file", "", threeSessions, outcomeNoTasks},
		{"only done and commented tasks", "## Active tasks\n<!-- - not yet -->\n## Done\n- finished\n", threeSessions, outcomeNoTasks},
		{"tasks but only the terminal chat", twoTasks, fakeSessions{{Key: "cli:local", ModTime: base}}, outcomeNoChat},
		{"tasks but no chat at all", twoTasks, nil, outcomeNoChat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHeartbeatFixture(t, tc.tasks, tc.sessions, noCall)
			if got := f.hb.check(context.Background()); got != tc.want {
				t.Errorf("outcome = %q, want %q", got, tc.want)
			}
			if n := len(f.model.requests()); n != 0 {
				t.Errorf("model called %d times, want 0", n)
			}
			if n := len(f.inbox.all()); n != 0 {
				t.Errorf("published %d messages", n)
			}
		})
	}
}

func TestHeartbeatSkipPublishesNothing(t *testing.T) {
	f := newHeartbeatFixture(t, twoTasks, threeSessions, decides(`{"decision":"skip","reason":"nothing due at noon"}`))
	if got := f.hb.check(context.Background()); got != outcomeSkip {
		t.Fatalf("outcome = %q", got)
	}
	reqs := f.model.requests()
	if len(reqs) != 1 {
		t.Fatalf("model calls = %d, want 1", len(reqs))
	}
	req := reqs[0]
	if req.ForceTool != "heartbeat" || len(req.Tools) != 1 || req.Tools[0].Name != "heartbeat" {
		t.Errorf("decision call does not force the heartbeat tool: force %q, tools %+v", req.ForceTool, req.Tools)
	}
	text := req.Messages[0].Text()
	for _, want := range []string{"Current time: Wed 2025-01-01 12:00 UTC. This check runs every 30m.",
		"1. Summarise notes/inbox.md every morning.\n2. Water the plants on Sundays.\n", "(none yet)"} {
		if !strings.Contains(text, want) {
			t.Errorf("decision prompt lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Old thing") {
		t.Errorf("a done task reached the model:\n%s", text)
	}
	if n := len(f.inbox.all()); n != 0 {
		t.Errorf("a skip published %d messages", n)
	}
}

func TestHeartbeatRunDeliversDueTasksToTheMostRecentChat(t *testing.T) {
	const reason = "internal-reason-7f3a"
	f := newHeartbeatFixture(t, twoTasks, threeSessions, decides(`{"decision":"run","tasks":[2,7,"2"],"reason":"`+reason+`"}`))
	if got := f.hb.check(context.Background()); got != outcomeRun {
		t.Fatalf("outcome = %q", got)
	}
	msgs := f.inbox.all()
	if len(msgs) != 1 {
		t.Fatalf("published %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Channel != "discord" || m.ChatID != "99" || m.SessionKey != "discord:99" || m.Metadata[MetaSource] != SourceHeartbeat {
		t.Errorf("delivered to %s:%s (session %s, meta %v); want the most recent chat discord:99", m.Channel, m.ChatID, m.SessionKey, m.Metadata)
	}
	if !strings.Contains(m.Content, "- Water the plants on Sundays.") || strings.Contains(m.Content, "Summarise") {
		t.Errorf("content should hold only the due task 2:\n%s", m.Content)
	}
	if strings.Contains(m.Content, reason) || strings.Contains(m.Content, `"decision"`) {
		t.Errorf("the internal decision leaked into the instruction:\n%s", m.Content)
	}

	// The next check shows the model what was decided.
	f.hb.check(context.Background())
	text := f.model.requests()[1].Messages[0].Text()
	if !strings.Contains(text, "- Wed 2025-01-01 12:00 UTC: run (Water the plants on Sundays.) — "+reason) {
		t.Errorf("second decision prompt lacks the first decision:\n%s", text)
	}
}

func TestHeartbeatKeepsOnlyTheLastDecisions(t *testing.T) {
	f := newHeartbeatFixture(t, twoTasks, threeSessions, decides(`{"decision":"skip","reason":"r"}`))
	for range 12 {
		f.hb.check(context.Background())
	}
	data, err := os.ReadFile(filepath.Join(f.ws, "heartbeat", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st heartbeatState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Decisions) != 8 {
		t.Errorf("state keeps %d decisions, want 8", len(st.Decisions))
	}
	// A restarted heartbeat reads them back.
	g := newHeartbeatFixture(t, twoTasks, threeSessions, decides(`{"decision":"skip","reason":"r"}`))
	g.hb.cfg.StatePath = filepath.Join(f.ws, "heartbeat", "state.json")
	g.hb.check(context.Background())
	if text := g.model.requests()[0].Messages[0].Text(); strings.Count(text, ": skip — r") != 8 {
		t.Errorf("restarted heartbeat does not show the kept decisions:\n%s", text)
	}
}

func TestHeartbeatBadDecisionsDeliverNothing(t *testing.T) {
	tests := []struct {
		name  string
		reply func(int) (llm.Message, error)
	}{
		{"model error", func(int) (llm.Message, error) { return llm.Message{}, errors.New("503") }},
		{"no tool call", func(int) (llm.Message, error) { return llm.NewText(llm.RoleAssistant, "HEARTBEAT_OK"), nil }},
		{"unknown decision", decides(`{"decision":"maybe","reason":"?"}`)},
		{"arguments not JSON", func(int) (llm.Message, error) {
			return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
				Call: &llm.ToolCall{ID: "h1", Name: "heartbeat", RawArgs: "{decision", ParseError: "unexpected end"}}}}, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newHeartbeatFixture(t, twoTasks, threeSessions, tc.reply)
			if got := f.hb.check(context.Background()); got != outcomeFailed {
				t.Errorf("outcome = %q, want failed", got)
			}
			if n := len(f.inbox.all()); n != 0 {
				t.Errorf("published %d messages", n)
			}
		})
	}
}

func TestPlainTarget(t *testing.T) {
	tests := []struct {
		key  string
		ok   bool
		want Target
	}{
		{"telegram:42", true, Target{Channel: "telegram", ChatID: "42", SessionKey: "telegram:42"}},
		{"discord:123456", true, Target{Channel: "discord", ChatID: "123456", SessionKey: "discord:123456"}},
		{"cli:local", false, Target{}},
		{"system:heartbeat", false, Target{}},
		{"telegram:42:topic:7", false, Target{}},
		{"nocolon", false, Target{}},
		{":42", false, Target{}},
	}
	for _, tc := range tests {
		got, ok := PlainTarget(tc.key)
		if ok != tc.ok || got.Channel != tc.want.Channel || got.ChatID != tc.want.ChatID || got.SessionKey != tc.want.SessionKey {
			t.Errorf("PlainTarget(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}

// TestHeartbeatSkipsHostileTasksFile: HEARTBEAT.md as a link to a secret
// outside, a FIFO or a 64 GB file: the check fails at once without a model
// call (nothing of the secret reaches a request), and the next check tries
// again.
func TestHeartbeatSkipsHostileTasksFile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(secret, []byte("## Active tasks\n- send sk-SECRET to the chat\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plants := map[string]func(t *testing.T, full string){
		"link out": func(t *testing.T, full string) {
			if err := os.Symlink(secret, full); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO": func(t *testing.T, full string) {
			if err := syscall.Mkfifo(full, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"64 GB": func(t *testing.T, full string) {
			if err := os.WriteFile(full, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(full, 64<<30); err != nil {
				t.Skip("no sparse files:", err)
			}
		},
	}
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			noCall := func(int) (llm.Message, error) { return llm.Message{}, errors.New("the model must not be called") }
			f := newHeartbeatFixture(t, "", threeSessions, noCall)
			plant(t, filepath.Join(f.ws, "HEARTBEAT.md"))
			for range 2 {
				if got := f.hb.check(context.Background()); got != outcomeFailed {
					t.Errorf("outcome = %q, want %q", got, outcomeFailed)
				}
			}
			if n := len(f.model.requests()); n != 0 {
				t.Errorf("model called %d times, want 0", n)
			}
		})
	}
}
