package schedule_test

// These tests drive the real agent, session store, tool registry and
// provider router with the scripted model: the model creates a reminder
// with the cron tool in a Telegram chat, the scheduler publishes its run on
// the bus when the fake clock gets there, and the agent answers in that chat.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	nanobot "github.com/nanobot-go/nanobot"
	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/agent/agentconfig"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/bustest"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// world is a running agent on a temporary workspace whose outbound
// messages are recorded.
type world struct {
	t      *testing.T
	ws     string
	log    *zap.Logger
	clock  *clock.Fake
	script *fakellm.Script
	bus    *bus.Bus
	store  *session.Store
	reg    *tools.Registry
	router *provider.Router
	rec    *bustest.Recorder // takes the outbound messages as a channel manager would
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, ws: t.TempDir(), log: zaptest.NewLogger(t), clock: clock.NewFake(), script: &fakellm.Script{},
		bus: bus.New(64)}
	w.store = session.NewStore(filepath.Join(w.ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, w.log)
	w.reg = tools.NewRegistry(tools.RegistryOptions{Timeout: 5 * time.Second, MaxOutput: config.Defaults().Agents.MaxToolOutput}, w.log)
	w.router = provider.NewRouter(map[string]provider.Streamer{"openai": &fakellm.Streamer{Name: "openai", Script: w.script}},
		provider.Options{Default: "openai/gpt-4o-mini", MaxRetries: map[string]int{"openai": 0}}, w.log)
	acfg := agentconfig.Defaults(w.ws, "test")
	acfg.MaxTokens, acfg.DraftInterval = 1000, time.Nanosecond
	ag := agent.New(acfg,
		agent.Deps{Model: w.router, Sessions: w.store, Tools: w.reg, Out: w.bus,
			Prompt: &agent.PromptBuilder{Workspace: w.ws, Files: wstest.Files(t, w.ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test"}, Clock: clock.Func(w.clock.Now)}, w.log)

	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = ag.Run(ctx, w.bus.Inbound())
	}()
	w.rec = bustest.Record(w.bus)
	t.Cleanup(func() {
		w.bus.CloseInbound()
		<-agentDone
		cancel()
		w.bus.CloseOutbound()
		<-w.rec.Done()
		_ = w.store.Close()
	})
	return w
}

// cron starts a scheduler on the workspace's jobs file and offers its tool
// to the model, replacing the tool of an earlier scheduler (a restart).
func (w *world) cron() (*schedule.Cron, func()) {
	w.t.Helper()
	c := schedule.NewCron(schedule.CronConfig{Path: filepath.Join(w.ws, "cron", "jobs.json")},
		schedule.CronDeps{Bus: w.bus, Clock: w.clock}, w.log.Named("cron"))
	w.reg.Unregister("cron")
	if err := w.reg.Register(c.Tool(func(ch string) bool { return ch == "telegram" || ch == "discord" })); err != nil {
		w.t.Fatal(err)
	}
	return c, schedule.Start(w.t, c)
}

// userSays publishes what a Telegram or Discord channel would for a message.
func (w *world) userSays(channel, chat, sender, text string) {
	w.t.Helper()
	err := w.bus.PublishInbound(context.Background(), bus.InboundMessage{Channel: channel, ChatID: chat, SenderID: sender,
		MessageID: "m-" + text[:min(8, len(text))], Content: text, Metadata: map[string]string{"chat_type": "private"},
		Time: w.clock.Now()})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) outbound() []bus.OutboundMessage { return w.rec.All() }

// waitFinals waits for n turn answers (final messages) and returns them.
func (w *world) waitFinals(n int) []bus.OutboundMessage {
	w.t.Helper()
	out := w.rec.WaitFor(w.t, fmt.Sprintf("%d final messages", n), func(out []bus.OutboundMessage) bool {
		return len(bustest.Finals(out, "")) >= n
	})
	return bustest.Finals(out, "")
}

func (w *world) jobsFile() string {
	data, err := os.ReadFile(filepath.Join(w.ws, "cron", "jobs.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(data)
}

// toolResult is the content of the first tool result in a request.
func toolResult(t *testing.T, req fakellm.Request) fakellm.Result {
	t.Helper()
	for _, m := range req.Messages {
		if len(m.ToolResults) > 0 {
			return m.ToolResults[0]
		}
	}
	t.Fatalf("request has no tool result: %+v", req.Messages)
	return fakellm.Result{}
}

func TestReminderCreatedByTheModelFiresOnTimeAfterARestartInItsChat(t *testing.T) {
	w := newWorld(t)
	_, stopFirst := w.cron()

	w.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "cron",
			Args: `{"action":"add","at":"in 20m","message":"Remind the user to call mom."}`}}},
		fakellm.Reply{Text: "Done: I will remind you in 20 minutes."},
	)
	w.userSays("telegram", "42", "7", "remind me in 20 minutes to call mom")
	if got := w.waitFinals(1)[0]; got.Content != "Done: I will remind you in 20 minutes." || got.ChatID != "42" {
		t.Fatalf("answer = %+v", got)
	}
	added := toolResult(t, w.script.Requests()[1])
	if added.IsError || !strings.HasPrefix(added.Content, "Scheduled job ") {
		t.Fatalf("cron tool result = %+v", added)
	}
	id := strings.TrimSuffix(strings.Fields(added.Content)[2], ":")
	if !strings.Contains(w.jobsFile(), `"id": "`+id+`"`) {
		t.Fatalf("jobs.json lacks job %s:\n%s", id, w.jobsFile())
	}

	// The daemon restarts before the reminder is due.
	schedule.WaitArmed(t, w.clock, 20*time.Minute)
	stopFirst()
	_, _ = w.cron()
	schedule.WaitArmed(t, w.clock, 20*time.Minute)

	w.script.Push(fakellm.Reply{Text: "⏰ Time to call mom!"})
	w.clock.Advance(20 * time.Minute)
	finals := w.waitFinals(2)
	if got := finals[1]; got.Channel != "telegram" || got.ChatID != "42" || got.Content != "⏰ Time to call mom!" || got.IsError {
		t.Fatalf("reminder answer = %+v", got)
	}
	prompt := w.script.Requests()[2].LastUserText()
	for _, want := range []string{"[Wed 2025-01-01 12:20 UTC · telegram · chat 42 · from cron]", "Scheduled job " + id,
		"Remind the user to call mom."} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the run's user turn lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "LATE") {
		t.Errorf("an on-time run is flagged late:\n%s", prompt)
	}
	for _, m := range w.outbound() {
		if m.Channel != "telegram" || m.ChatID != "42" {
			t.Errorf("message went to %s:%s: %+v", m.Channel, m.ChatID, m)
		}
	}
	// Once the agent recorded the run in the chat's session, the one-time
	// job is gone from the file.
	schedule.Eventually(t, "the job is removed from jobs.json", func() bool { return !strings.Contains(w.jobsFile(), id) })
	snap, err := w.store.Get("telegram:42")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Messages); n != 6 { // user, call, result, answer; cron run, answer
		t.Errorf("session has %d messages, want 6", n)
	}
}

func TestMissedReminderReachesTheModelFlaggedLate(t *testing.T) {
	w := newWorld(t)
	c, stop := w.cron()
	chat := schedule.Chat{Channel: "telegram", ChatID: "42", SenderID: "7", SessionKey: "telegram:42"}
	if _, err := c.Add(chat, schedule.When{At: "in 20m"}, "Remind the user to take the cake out."); err != nil {
		t.Fatal(err)
	}
	stop()
	w.clock.Advance(3 * time.Hour) // the gateway was down when it was due

	w.script.Push(fakellm.Reply{Text: "Sorry, this comes late: take the cake out!"})
	w.cron()
	if got := w.waitFinals(1)[0]; got.ChatID != "42" || !strings.Contains(got.Content, "comes late") {
		t.Fatalf("answer = %+v", got)
	}
	prompt := w.script.Requests()[0].LastUserText()
	if !strings.Contains(prompt, "It is running LATE: it was due at Wed 2025-01-01 12:20 UTC, 2h40m ago") {
		t.Errorf("the late run's user turn:\n%s", prompt)
	}
}

func TestACronTurnCannotCreateJobs(t *testing.T) {
	w := newWorld(t)
	c, _ := w.cron()
	chat := schedule.Chat{Channel: "telegram", ChatID: "42", SenderID: "7", SessionKey: "telegram:42"}
	orig, err := c.Add(chat, schedule.When{Every: "1h"}, "Check the forecast; if rain is coming, set a reminder to take an umbrella.")
	if err != nil {
		t.Fatal(err)
	}
	w.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "cron",
			Args: `{"action":"add","at":"in 5m","message":"Take an umbrella."}`}}},
		fakellm.Reply{Text: "Rain at 3 pm: take an umbrella."},
	)
	schedule.WaitArmed(t, w.clock, time.Hour)
	w.clock.Advance(time.Hour)
	if got := w.waitFinals(1)[0]; got.Content != "Rain at 3 pm: take an umbrella." {
		t.Fatalf("answer = %+v", got)
	}
	res := toolResult(t, w.script.Requests()[1])
	if !res.IsError || !strings.Contains(res.Content, "scheduled work cannot create jobs") {
		t.Errorf("cron add from a cron turn = %+v", res)
	}
	jobs, err := c.Jobs("telegram:42")
	if err != nil || len(jobs) != 1 || jobs[0].ID != orig.ID {
		t.Errorf("jobs after the run = %+v, %v; want only %s", jobs, err, orig.ID)
	}
}

// writeTemplateHeartbeat installs the workspace template's HEARTBEAT.md,
// optionally with tasks added under "## Active tasks".
func (w *world) writeHeartbeat(tasks ...string) {
	w.t.Helper()
	src, err := fs.ReadFile(nanobot.WorkspaceTemplate(), "HEARTBEAT.md")
	if err != nil {
		w.t.Fatal(err)
	}
	text := string(src)
	if len(tasks) > 0 {
		text = strings.Replace(text, "## Done", "- "+strings.Join(tasks, "\n- ")+"\n\n## Done", 1)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "HEARTBEAT.md"), []byte(text), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// chatted records a message in a session and dates its file at, as if the
// chat had last been active then.
func (w *world) chatted(key string, at time.Time) {
	w.t.Helper()
	if _, err := w.store.Append(key, llm.NewText(llm.RoleUser, "hello")); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(w.ws, "sessions", session.EncodeKey(key)+".jsonl"), at, at); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) heartbeat() {
	w.t.Helper()
	hb := schedule.NewHeartbeat(schedule.HeartbeatConfig{Interval: 30 * time.Minute,
		StatePath: filepath.Join(w.ws, "heartbeat", "state.json")},
		schedule.HeartbeatDeps{Workspace: wstest.Files(w.t, w.ws), Model: w.router, Bus: w.bus, Sessions: w.store, Clock: w.clock}, w.log.Named("heartbeat"))
	schedule.Start(w.t, hb)
}

func TestHeartbeatSkipPathMakesNoModelCall(t *testing.T) {
	w := newWorld(t)
	w.writeHeartbeat() // the template as installed: no active task
	w.chatted("telegram:42", time.Now())
	w.heartbeat()
	for range 4 {
		schedule.WaitArmed(t, w.clock, 30*time.Minute)
		w.clock.Advance(30 * time.Minute)
	}
	schedule.WaitArmed(t, w.clock, 30*time.Minute) // the fourth check is over
	if n := len(w.script.Requests()); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
	if out := w.outbound(); len(out) != 0 {
		t.Errorf("outbound: %+v", out)
	}
}

func TestHeartbeatRunDeliversToTheMostRecentChatWithoutInternalTokens(t *testing.T) {
	const reason = "internal-reason-7f3a"
	w := newWorld(t)
	w.writeHeartbeat("Each morning, summarise notes/inbox.md.", "On Sundays, remind me to water the plants.")
	now := time.Now()
	w.chatted("telegram:42", now.Add(-2*time.Hour))
	w.chatted("discord:99", now.Add(-time.Hour))
	w.chatted("cli:local", now) // the terminal is never a heartbeat target
	w.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "hb_1", Name: "heartbeat",
			Args: `{"decision":"run","tasks":[1],"reason":"` + reason + `"}`}}},
		fakellm.Reply{Text: "Your inbox has 3 new notes: ..."},
	)
	w.heartbeat()
	schedule.WaitArmed(t, w.clock, 30*time.Minute)
	w.clock.Advance(30 * time.Minute)

	if got := w.waitFinals(1)[0]; got.Channel != "discord" || got.ChatID != "99" || got.Content != "Your inbox has 3 new notes: ..." {
		t.Fatalf("answer = %+v", got)
	}
	reqs := w.script.Requests()
	if reqs[0].ToolChoice != "heartbeat" {
		t.Errorf("decision call forced %q, want heartbeat", reqs[0].ToolChoice)
	}
	turn := reqs[1].LastUserText()
	if !strings.Contains(turn, "discord · chat 99 · from heartbeat]") || !strings.Contains(turn, "- Each morning, summarise notes/inbox.md.") ||
		strings.Contains(turn, "water the plants") {
		t.Errorf("the run's user turn:\n%s", turn)
	}
	for _, m := range w.outbound() {
		if m.Channel != "discord" || m.ChatID != "99" {
			t.Errorf("message went to %s:%s", m.Channel, m.ChatID)
		}
		for _, token := range []string{reason, "HEARTBEAT_OK", `"decision"`, "heartbeat(", schedule.MetaSource + ":"} {
			if strings.Contains(m.Content, token) {
				t.Errorf("outbound %s message carries the internal token %q: %q", m.Kind, token, m.Content)
			}
		}
	}
	if n := len(reqs); n != 2 {
		t.Errorf("model calls = %d, want 2 (decision, turn)", n)
	}
}
