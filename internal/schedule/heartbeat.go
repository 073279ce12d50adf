package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Model is what the heartbeat needs from the provider router: one call.
type Model interface {
	Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error)
}

// SessionLister lists the session files, newest activity included; the
// heartbeat delivers to the chat whose session changed last.
type SessionLister interface {
	List() ([]session.Info, error)
}

// Target is a chat that work can be delivered to.
type Target struct {
	Channel    string
	ChatID     string
	SessionKey string
	// Metadata is the routing metadata replies need (thread, topic).
	Metadata map[string]string
}

// TargetFunc maps a session key to its chat, and says false for sessions
// that are not chats a run may go to (the terminal, system sessions,
// channels not running).
type TargetFunc func(key string) (Target, bool)

// PlainTarget understands "channel:chat_id" keys of any channel except
// "cli" and "system"; keys with more parts (topics, threads) are refused
// because only the channel knows how to address them.
func PlainTarget(key string) (Target, bool) {
	channel, chat, ok := strings.Cut(key, ":")
	if !ok || channel == "" || chat == "" || strings.Contains(chat, ":") || channel == "cli" || channel == "system" {
		return Target{}, false
	}
	return Target{Channel: channel, ChatID: chat, SessionKey: key}, true
}

// HeartbeatConfig configures the heartbeat. Zero values take the defaults.
type HeartbeatConfig struct {
	// Interval between checks (gateway.heartbeat.interval), taken as given.
	Interval time.Duration
	// StatePath keeps the last decisions: <data dir>/heartbeat/state.json,
	// outside the workspace (docs/schedule.md#where-jobs-live).
	StatePath string
	// Route is the model route for decisions ("" is the default route).
	Route string
	// Keep is how many past decisions are kept and shown to the model
	// [DefaultHeartbeatKeep].
	Keep int
}

// DefaultHeartbeatKeep is how many past heartbeat decisions are kept and
// shown to the model. Not a config key: enough for the model to see a
// pattern ("I told them yesterday"), few enough to stay a short prompt.
const DefaultHeartbeatKeep = 8

func (c HeartbeatConfig) withDefaults() HeartbeatConfig {
	if c.Keep <= 0 {
		c.Keep = DefaultHeartbeatKeep
	}
	return c
}

// HeartbeatDeps are the heartbeat's collaborators.
type HeartbeatDeps struct {
	// Workspace holds HEARTBEAT.md (workspace.HeartbeatFile), read at every
	// check through the daemon's confined access.
	Workspace *workspace.Files
	Model     Model
	Bus       Inbound
	Sessions  SessionLister
	// Target maps session keys to chats [PlainTarget].
	Target TargetFunc
	// Clock is the time source [the system clock].
	Clock clock.Clock
}

// Heartbeat checks HEARTBEAT.md every interval
// (docs/schedule.md#the-heartbeat). With no active task it does nothing,
// without calling the model. Otherwise it asks the model, with a forced
// heartbeat tool call, whether a task is due; on "run" it hands the due tasks
// to the agent as an inbound message in the most recently active chat, so the
// agent does them there and replies. The decision itself never reaches a chat.
//
// Its memory is the last Keep decisions (time, decision, tasks), shown to
// the model so it can tell a task done at 09:00 from one still due; they
// live in a small JSON file, not in a growing session.
type Heartbeat struct {
	cfg      HeartbeatConfig
	ws       *workspace.Files
	model    Model
	bus      Inbound
	sessions SessionLister
	target   TargetFunc
	clock    clock.Clock
	log      *zap.Logger

	// state is only used by Run's goroutine.
	state *heartbeatState
}

// NewHeartbeat returns a heartbeat; it does no I/O.
func NewHeartbeat(cfg HeartbeatConfig, deps HeartbeatDeps, log *zap.Logger) *Heartbeat {
	clk := deps.Clock
	if clk == nil {
		clk = clock.System{}
	}
	target := deps.Target
	if target == nil {
		target = PlainTarget
	}
	return &Heartbeat{cfg: cfg.withDefaults(), ws: deps.Workspace, model: deps.Model, bus: deps.Bus, sessions: deps.Sessions,
		target: target, clock: clk, log: log}
}

// Run checks every interval until ctx ends. The first check is one interval
// after the start, so restarts do not trigger runs.
func (h *Heartbeat) Run(ctx context.Context) error {
	h.log.Info("heartbeat started", zap.Duration("interval", h.cfg.Interval), zap.String("file", workspace.HeartbeatFile))
	for {
		t := h.clock.NewTimer(h.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		h.check(ctx)
	}
}

// Outcomes of one check, for logs and tests.
const (
	outcomeNoTasks = "no active tasks"
	outcomeNoChat  = "no chat to deliver to"
	outcomeSkip    = "skip"
	outcomeRun     = "run"
	outcomeFailed  = "failed"
)

// check does one heartbeat and reports what happened.
func (h *Heartbeat) check(ctx context.Context) string {
	src, _, err := h.ws.ReadText(workspace.HeartbeatFile, workspace.MaxPromptFileBytes)
	if err != nil {
		// A link out, a FIFO, a huge file: one log line (Files.Skip), and
		// the next check tries again.
		h.ws.Skip(workspace.HeartbeatFile, "heartbeat", err)
		return outcomeFailed
	}
	tasks := ActiveTasks([]byte(src))
	if len(tasks) == 0 {
		h.log.Debug("heartbeat: no active tasks; nothing to do")
		return outcomeNoTasks
	}
	target, ok := h.lastActive()
	if !ok {
		h.log.Info("heartbeat: active tasks but no chat to deliver to yet; skipping")
		return outcomeNoChat
	}
	now := h.clock.Now()
	d, err := h.decide(ctx, tasks, now)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("heartbeat: decision failed; trying again next interval", zap.Error(err))
		}
		return outcomeFailed
	}
	if d.Decision == outcomeRun {
		if err := h.deliver(ctx, target, d.Tasks, now); err != nil {
			h.log.Warn("heartbeat: deliver", zap.Error(err))
			return outcomeFailed
		}
	}
	h.remember(d)
	h.log.Info("heartbeat decided", zap.String("decision", d.Decision), zap.String("reason", d.Reason),
		zap.Int("tasks", len(d.Tasks)), zap.String("chat", target.SessionKey))
	return d.Decision
}

// lastActive is the chat whose session was written last.
func (h *Heartbeat) lastActive() (Target, bool) {
	infos, err := h.sessions.List()
	if err != nil {
		h.log.Warn("heartbeat: list sessions", zap.Error(err))
		return Target{}, false
	}
	var best Target
	var bestTime time.Time
	found := false
	for _, in := range infos {
		t, ok := h.target(in.Key)
		if ok && (!found || in.ModTime.After(bestTime)) {
			best, bestTime, found = t, in.ModTime, true
		}
	}
	return best, found
}

// decision is one heartbeat decision, as the model made it and as the state
// file keeps it.
type decision struct {
	Time     time.Time `json:"time"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
	Tasks    []string  `json:"tasks,omitempty"`
}

// heartbeatTool is the forced tool of the decision call.
var heartbeatTool = llm.ToolSpec{
	Name:        "heartbeat",
	Description: "Report whether any of the periodic tasks should be done now.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"decision":{"type":"string","enum":["skip","run"],"description":"run if at least one task is due now, otherwise skip."},` +
		`"tasks":{"type":"array","items":{"type":"integer"},"description":"With run: the numbers of the tasks that are due."},` +
		`"reason":{"type":"string","description":"One short sentence on why."}},` +
		`"required":["decision","reason"]}`),
}

const heartbeatSystem = "You are the scheduler of a personal assistant. At a fixed interval you read the user's list of " +
	"periodic tasks and decide whether any of them should be done right now. Consider the current time, what each task " +
	"says about when or how often to do it, and when tasks were last run (recent decisions are listed). When unsure " +
	"whether a task already ran in its period, skip. Do not do the tasks and do not write to the user: only call the " +
	"heartbeat tool, exactly once."

// decide asks the model, with the heartbeat tool forced.
func (h *Heartbeat) decide(ctx context.Context, tasks []string, now time.Time) (decision, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Current time: %s. This check runs every %s.\n\nActive tasks (from HEARTBEAT.md):\n",
		now.Format("Mon 2006-01-02 15:04 MST"), shortDuration(h.cfg.Interval))
	for i, t := range tasks {
		fmt.Fprintf(&b, "%d. %s\n", i+1, t)
	}
	b.WriteString("\nRecent decisions, oldest first:\n")
	past := h.loadState().Decisions
	if len(past) == 0 {
		b.WriteString("(none yet)\n")
	}
	for _, p := range past {
		fmt.Fprintf(&b, "- %s: %s", p.Time.In(now.Location()).Format("Mon 2006-01-02 15:04 MST"), p.Decision)
		if len(p.Tasks) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(p.Tasks, "; "))
		}
		if p.Reason != "" {
			fmt.Fprintf(&b, " — %s", p.Reason)
		}
		b.WriteString("\n")
	}
	req := llm.Request{
		System:    heartbeatSystem,
		Messages:  []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(b.String())}, Time: now}},
		Tools:     []llm.ToolSpec{heartbeatTool},
		ForceTool: heartbeatTool.Name,
		MaxTokens: 1024,
	}
	// The decision is the heartbeat's own call (budget.origins.heartbeat);
	// the turn it may start is counted as heartbeat too, by its source.
	ctx = usage.WithCall(ctx, usage.Call{Origin: usage.OriginHeartbeat})
	msg, err := h.model.Complete(ctx, h.cfg.Route, req, nil)
	if err != nil {
		return decision{}, fmt.Errorf("heartbeat decision: %w", err)
	}
	return parseDecision(msg, tasks, now)
}

// parseDecision reads the model's heartbeat call. Task numbers that do not
// exist are ignored; "run" without valid numbers means every task.
func parseDecision(msg llm.Message, tasks []string, now time.Time) (decision, error) {
	for _, c := range msg.ToolCalls() {
		if c.Name != heartbeatTool.Name {
			continue
		}
		if c.ParseError != "" {
			return decision{}, fmt.Errorf("heartbeat decision: arguments are not JSON: %s", c.ParseError)
		}
		var a struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
			// Numbers, though some models send them as strings.
			Tasks []json.Number `json:"tasks"`
		}
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return decision{}, fmt.Errorf("heartbeat decision: %w", err)
		}
		d := decision{Time: now, Decision: a.Decision, Reason: a.Reason}
		switch a.Decision {
		case outcomeSkip:
			return d, nil
		case outcomeRun:
		default:
			return decision{}, fmt.Errorf("heartbeat decision: %q is neither skip nor run", a.Decision)
		}
		for _, num := range a.Tasks {
			n, err := strconv.Atoi(num.String())
			if err == nil && n >= 1 && n <= len(tasks) && !slices.Contains(d.Tasks, tasks[n-1]) {
				d.Tasks = append(d.Tasks, tasks[n-1])
			}
		}
		if len(d.Tasks) == 0 {
			d.Tasks = tasks
		}
		return d, nil
	}
	return decision{}, errors.New("heartbeat decision: the model did not call the heartbeat tool")
}

// deliver hands the due tasks to the agent in the target chat.
func (h *Heartbeat) deliver(ctx context.Context, t Target, tasks []string, now time.Time) error {
	var b strings.Builder
	b.WriteString("💓 Periodic tasks from HEARTBEAT.md are due now:\n\n")
	for _, task := range tasks {
		fmt.Fprintf(&b, "- %s\n", task)
	}
	b.WriteString("\nDo them now and tell the user the outcome in a short message. Nobody asked in this chat just now: " +
		"these tasks were started by the schedule.")
	m := bus.InboundMessage{
		Channel: t.Channel, ChatID: t.ChatID, SenderID: SourceHeartbeat, SenderName: SourceHeartbeat,
		SessionKey: t.SessionKey, Content: b.String(), Time: now,
		Metadata: withSource(t.Metadata, map[string]string{MetaSource: SourceHeartbeat}),
	}
	if err := h.bus.PublishInbound(ctx, m); err != nil {
		return fmt.Errorf("publish to %s: %w", t.SessionKey, err)
	}
	return nil
}

// heartbeatState is the state file: the last decisions, oldest first.
type heartbeatState struct {
	Decisions []decision `json:"decisions"`
}

// loadState reads the state file once. It is the heartbeat's own record and
// worth nothing to the user, so an unreadable one is replaced.
func (h *Heartbeat) loadState() *heartbeatState {
	if h.state != nil {
		return h.state
	}
	h.state = &heartbeatState{}
	if h.cfg.StatePath == "" {
		return h.state
	}
	data, err := os.ReadFile(h.cfg.StatePath)
	if err == nil {
		err = json.Unmarshal(data, h.state)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		h.log.Warn("heartbeat: state unreadable; starting afresh", zap.String("file", h.cfg.StatePath), zap.Error(err))
		h.state = &heartbeatState{}
	}
	return h.state
}

// remember appends d and keeps the newest Keep decisions.
func (h *Heartbeat) remember(d decision) {
	s := h.loadState()
	s.Decisions = append(s.Decisions, d)
	if over := len(s.Decisions) - h.cfg.Keep; over > 0 {
		s.Decisions = append([]decision(nil), s.Decisions[over:]...)
	}
	if h.cfg.StatePath == "" {
		return
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		err = writeFileAtomic(h.cfg.StatePath, append(data, '\n'))
	}
	if err != nil {
		h.log.Warn("heartbeat: save state", zap.Error(err))
	}
}
