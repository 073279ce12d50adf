package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// MetaSource is the inbound Metadata key that marks a message the program
// wrote, not a person; its value says what wrote it: MetaSubagent here,
// "cron" and "heartbeat" in internal/schedule. Such a message is never
// parsed as a chat command, and the turn it starts is the main agent
// reacting to it.
const MetaSource = "source"

// MetaSubagent is MetaSource's value on a subagent's result.
const MetaSubagent = "subagent"

// SpawnToolName is the name of the spawn tool; subagents never get it.
const SpawnToolName = "spawn"

// InboundPublisher lets the agent post a message to itself through the bus
// (a subagent's result), so it is queued behind the session's turns like
// any other message.
type InboundPublisher interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
}

// errSubagentLimit is returned by a subagent that used all its iterations.
var errSubagentLimit = errors.New("iteration limit reached")

// subagents tracks the running subagents per session. Each runs in a
// goroutine counted in Agent.wg, under a context derived from Run's, so
// /stop cancels a session's and shutdown cancels all.
type subagents struct {
	mu     sync.Mutex
	ctx    context.Context // Run's; nil before Run and after close
	cancel context.CancelFunc
	closed bool
	byKey  map[string]map[string]*subagent
	total  int
}

type subagent struct {
	id, key, label, task string
	cancel               context.CancelFunc
	// root is the context of all subagents, cancelled when Run ends; the
	// announcement uses it so a shutdown never waits on a full bus.
	root context.Context
}

// start makes spawning possible under ctx (called by Run).
func (s *subagents) start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.byKey = map[string]map[string]*subagent{}
}

// close cancels every subagent and refuses new ones (called when Run ends).
func (s *subagents) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
}

// cancelSession cancels key's subagents and reports how many there were.
func (s *subagents) cancelSession(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sa := range s.byKey[key] {
		sa.cancel()
	}
	return len(s.byKey[key])
}

func (s *subagents) running(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey[key])
}

func (s *subagents) remove(sa *subagent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.byKey[sa.key]; m != nil {
		delete(m, sa.id)
		if len(m) == 0 {
			delete(s.byKey, sa.key)
		}
	}
	s.total--
}

// spawn starts a subagent for task on behalf of origin's session.
func (a *Agent) spawn(origin tools.Origin, task, label string) (*subagent, error) {
	if a.subTools == nil {
		return nil, errors.New("background tasks are not available in this setup")
	}
	s := &a.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ctx == nil || s.closed:
		return nil, errors.New("the assistant is shutting down; do the task yourself or later")
	case s.total >= a.cfg.MaxSubagents:
		return nil, fmt.Errorf("%d background tasks are already running (the limit); wait for one to finish or do this yourself", s.total)
	case len(s.byKey[origin.SessionKey]) >= a.cfg.MaxSubagentsPerSession:
		return nil, fmt.Errorf("this chat already has %d background tasks running (the limit); wait for one to finish or do this yourself", len(s.byKey[origin.SessionKey]))
	}
	ctx, cancel := context.WithTimeout(s.ctx, a.cfg.SubagentTimeout)
	sa := &subagent{id: newTurnID(), key: origin.SessionKey, label: label, task: task, cancel: cancel, root: s.ctx}
	if s.byKey[sa.key] == nil {
		s.byKey[sa.key] = map[string]*subagent{}
	}
	s.byKey[sa.key][sa.id] = sa
	s.total++
	// Added under s.mu, before close can run, so Run's Wait covers it.
	a.wg.Go(func() {
		defer s.remove(sa)
		defer cancel()
		a.runSubagent(ctx, sa, origin)
	})
	return sa, nil
}

// runSubagent does the task and announces the outcome to the origin's
// session; a subagent cancelled by /stop or shutdown announces nothing.
func (a *Agent) runSubagent(ctx context.Context, sa *subagent, origin tools.Origin) {
	log := a.log.With(zap.String("subagent", sa.id), zap.String("session", sa.key))
	log.Info("subagent started", zap.String("label", sa.label))
	start := a.now()
	result, err := a.subagentLoop(ctx, sa, origin, log)
	status := "completed"
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		log.Info("subagent cancelled", zap.Duration("elapsed", a.now().Sub(start)))
		return
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		status = fmt.Sprintf("stopped: it ran out of time (%s)", a.cfg.SubagentTimeout)
	case errors.Is(err, errSubagentLimit):
		status = fmt.Sprintf("stopped after %d steps without finishing", a.cfg.SubagentIterations)
	case err != nil:
		status = "failed"
		result = llm.Classify(err).UserText()
	}
	log.Info("subagent finished", zap.String("status", status), zap.Duration("elapsed", a.now().Sub(start)), zap.Error(err))
	if strings.TrimSpace(result) == "" {
		result = "(no result text)"
	}
	a.announce(sa, origin, status, result, log)
}

// announce posts the outcome as a system message in the origin's session;
// the main agent then tells the user in its own words.
func (a *Agent) announce(sa *subagent, origin tools.Origin, status, result string, log *zap.Logger) {
	name := sa.label
	if name == "" {
		name = sa.id
	}
	content := fmt.Sprintf("[System message, not written by the user: the background task %q that you started has finished.]\n"+
		"Task: %s\nStatus: %s\nResult:\n%s\n\n"+
		"Tell the user what came of it in a few sentences, in their language. Do not mention subagents or task ids unless they ask.",
		name, sa.task, status, result)
	meta := maps.Clone(origin.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaSource] = MetaSubagent
	m := bus.InboundMessage{
		Channel: origin.Channel, ChatID: origin.ChatID, SenderID: origin.SenderID, MessageID: origin.MessageID,
		Content: content, Metadata: meta, SessionKey: sa.key, Time: a.now(),
	}
	ctx, cancel := context.WithTimeout(sa.root, 30*time.Second)
	defer cancel()
	if err := a.in.PublishInbound(ctx, m); err != nil {
		log.Warn("could not announce the subagent's result", zap.Error(err))
	}
}

// subagentLoop is a reduced agent loop: its own prompt, the reduced tool
// set, SubagentIterations model calls at most, and its messages kept only in
// memory (no session file). Drafts and tool hints are not published: the
// user hears only the main agent's summary.
func (a *Agent) subagentLoop(ctx context.Context, sa *subagent, origin tools.Origin, log *zap.Logger) (string, error) {
	snap, err := a.store.Get(sa.key)
	if err != nil {
		return "", fmt.Errorf("subagent: %w", err)
	}
	route := a.routeOf(snap)
	system := a.subagentPrompt()
	systemTokens := history.EstimateText(system)
	specs := a.subTools.Specs()
	toolTokens := a.subToolTokens.of(specs)
	t := &turn{id: sa.id, key: sa.key, callIDs: map[string]bool{}}
	origin.TurnID = sa.id
	msgs := []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(sa.task)}, Time: a.now()}}
	last := ""
	ctx = usage.WithCall(ctx, usage.Call{Origin: usage.OriginSubagent, Session: sa.key, Chat: usage.ChatOf(sa.key)})
	for iter := 0; iter < a.cfg.SubagentIterations; iter++ {
		req := llm.Request{System: system, Tools: specs, MaxTokens: a.cfg.MaxTokens, Temperature: a.cfg.Temperature,
			Fit: a.fit(toolTokens, func(opt history.Options) []llm.Message { return history.Project(system, msgs, opt).Messages }, systemTokens)}
		var msg llm.Message
		err := a.withSlot(ctx, origin.Group, func() (err error) {
			if iter == 0 {
				ctx = a.admit(ctx) // a subagent run is admitted once, like a turn
			}
			msg, err = a.model.Complete(ctx, route, req, nil)
			return err
		})
		if err != nil {
			return last, err
		}
		msg.Time = a.now()
		t.uniqueCallIDs(&msg, iter)
		msgs = append(msgs, msg)
		if text := strings.TrimSpace(msg.Text()); text != "" {
			last = text
		}
		calls := msg.ToolCalls()
		if len(calls) == 0 {
			return msg.Text(), nil
		}
		results := llm.Message{Role: llm.RoleTool, Time: a.now()}
		for _, c := range calls {
			r := a.subTools.Execute(ctx, c, origin)
			r.ToolCallID, r.Name = c.ID, c.Name
			r.Content = history.Detail(c, r)
			log.Debug("subagent tool call", zap.String("tool", c.Name), zap.Bool("error", r.IsError))
			results.Parts = append(results.Parts, llm.Part{Kind: llm.PartToolResult, Result: &r})
		}
		msgs = append(msgs, results)
		if err := ctx.Err(); err != nil {
			return last, err
		}
	}
	return last, errSubagentLimit
}

// subagentPrompt is the subagent's system prompt: the task comes as its
// user message; this says how to work and what to hand back.
func (a *Agent) subagentPrompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# nanobot subagent

You are a subagent of nanobot, a personal AI assistant. The main agent started you to do one task in the background; the task is the user message below. It is %s. You run on %s/%s.

## Rules

- Do the task and nothing else. Work on your own: nobody can answer questions while you work.
- You cannot message the user or start other tasks. Your final answer goes to the main agent, which tells the user.
- End with a concise report: what you did, what you found or changed (facts, numbers, file paths), and anything left open. Never invent a tool's result.
- Your workspace is %s; file tools work relative to it. Long-term memory is in memory/MEMORY.md; memory/HISTORY.md is a log you can search.`,
		a.now().Format("Mon 2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, a.cfg.Workspace)
	if a.prompt != nil {
		loader := a.prompt.Skills
		loader.Workspace = a.prompt.Files.FS(workspace.SkillsDir)
		list, _ := loader.Load()
		if summary := skills.Summary(list); summary != "" {
			b.WriteString("\n\n## Skills\n\nTo use a skill, read its SKILL.md at the given location with read_file.\n\n")
			b.WriteString(summary)
		}
	}
	return b.String()
}

// spawnTool is the spawn tool (docs/subagents.md): it starts a subagent and
// returns at once.
type spawnTool struct{ a *Agent }

// SpawnTool returns the spawn tool, to be registered in the main agent's
// registry (and hidden from Deps.SubagentTools).
func (a *Agent) SpawnTool() tools.Tool { return spawnTool{a} }

func (spawnTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: SpawnToolName,
		Description: "Start a subagent that works on a task in the background, for work that takes many steps or a long time " +
			"(research, going through many files, long commands). It has the file, shell and web tools but not this chat's history, " +
			"so describe the task completely. It returns at once; the subagent's result comes back to you later as a system message, " +
			"and you then tell the user. Tell the user you started it; do not wait for it.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"task":{"type":"string","description":"The complete, self-contained task: what to do and what to report back."},` +
			`"label":{"type":"string","description":"A short name for the task, shown to the user (e.g. \"compare flight prices\")."}` +
			`},"required":["task"]}`),
	}
}

type spawnArgs struct {
	Task  string `json:"task"`
	Label string `json:"label"`
}

func (t spawnTool) Run(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	args, err := tools.DecodeArgs[spawnArgs]("spawn", inv)
	if err != nil {
		return tools.Result{}, err
	}
	args.Task = strings.TrimSpace(args.Task)
	if args.Task == "" {
		return tools.Result{}, errors.New("spawn: task is empty; describe what the subagent should do")
	}
	if r := []rune(strings.TrimSpace(args.Label)); len(r) > 60 {
		args.Label = string(r[:60])
	}
	sa, err := t.a.spawn(inv.Origin, args.Task, strings.TrimSpace(args.Label))
	if err != nil {
		return tools.Result{}, err
	}
	name := sa.label
	if name == "" {
		name = "task " + sa.id
	}
	return tools.Result{Text: fmt.Sprintf("Started the background task %q (id %s). Its result will arrive as a system message; "+
		"tell the user it is running.", name, sa.id)}, nil
}

// isSystem reports whether m was written by the program (MetaSource).
func isSystem(m bus.InboundMessage) bool { return m.Metadata[MetaSource] != "" }
