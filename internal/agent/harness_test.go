package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
	"github.com/nanobot-go/nanobot/internal/testkit/bustest"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// harness runs a real agent with a real session store, real tools and the
// scripted in-process model, and records everything it publishes.
type harness struct {
	t  *testing.T
	ws string
	// ledger records every model call the agent makes (usage).
	ledger *usage.Ledger
	script *fakellm.Script
	store  *session.Store
	bus    *bus.Bus
	agent  *Agent
	reg    *tools.Registry
	memory *memory.Consolidator
	// cancel ends the agent's context, as the daemon does when the
	// shutdown grace period is over.
	cancel context.CancelFunc

	// rec takes the outbound messages as a channel manager would.
	rec *bustest.Recorder

	mu       sync.Mutex
	acked    map[string]int
	outcomes []string // reported to the Observer, in order
}

// TurnDone records outcomes: the harness is the agent's Observer.
func (h *harness) TurnDone(outcome string, _ time.Duration) {
	h.mu.Lock()
	h.outcomes = append(h.outcomes, outcome)
	h.mu.Unlock()
}

func (h *harness) turnOutcomes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.outcomes...)
}

func newHarness(t *testing.T, tweak ...func(*Config)) *harness {
	t.Helper()
	return newHarnessDeps(t, nil, tweak...)
}

// newHarnessDeps is newHarness with a change to the agent's Deps.
func newHarnessDeps(t *testing.T, deps func(*Deps), tweak ...func(*Config)) *harness {
	t.Helper()
	ws := t.TempDir()
	h := &harness{t: t, ws: ws, script: &fakellm.Script{}, bus: bus.New(64), acked: map[string]int{}}
	log := zaptest.NewLogger(t)
	h.store = session.NewStore(filepath.Join(ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, log)
	root, err := workspace.OpenRoot(ws, workspace.Options{Restrict: true})
	if err != nil {
		t.Fatal(err)
	}
	h.reg = tools.NewRegistry(tools.RegistryOptions{Timeout: 5 * time.Second, MaxOutput: config.Defaults().Agents.MaxToolOutput}, log)
	for _, tool := range []tools.Tool{tools.NewReadFile(root, tools.WithMount(skills.BuiltinScheme, builtin.FS())), tools.NewWriteFile(root), tools.NewListDir(root),
		tools.NewMessage(h.bus, func(string, string) bool { return false }, root)} {
		if err := h.reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	if h.ledger, err = usage.Open(t.TempDir(), usage.Options{}); err != nil {
		t.Fatal(err)
	}
	router := provider.NewRouter(map[string]provider.Streamer{"openai": &fakellm.Streamer{Name: "openai", Script: h.script}},
		provider.Options{Default: "openai/gpt-4o-mini", Routes: map[string]provider.RouteSpec{"smart": {Model: "openai/gpt-4.1"}},
			MaxRetries: map[string]int{"openai": 0}, Usage: h.ledger}, log)
	cfg := defaultConfig(ws, "test")
	cfg.MaxTokens, cfg.DraftInterval = 1000, time.Nanosecond
	for _, f := range tweak {
		f(&cfg)
	}
	h.memory = memory.NewConsolidator(memory.NewFiles(root), router, memory.Config{MaxTokens: 1000}, log.Named("memory"))
	d := Deps{Model: router, Sessions: h.store, Tools: h.reg, Out: h.bus,
		Prompt: &PromptBuilder{Workspace: ws, MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test", Skills: skills.Loader{Builtin: builtin.FS()}},
		Memory: h.memory, SubagentTools: h.reg.Without("message", SpawnToolName, "cron"), In: h.bus, Observer: h}
	if deps != nil {
		deps(&d)
	}
	h.agent = New(cfg, d, log)
	if err := h.reg.Register(h.agent.SpawnTool()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = h.agent.Run(ctx, h.bus.Inbound())
	}()
	h.rec = bustest.Record(h.bus)
	t.Cleanup(func() {
		h.bus.CloseInbound()
		select {
		case <-agentDone:
		case <-time.After(10 * time.Second):
			t.Error("agent did not drain within 10s")
			cancel()
			<-agentDone
		}
		cancel()
		h.bus.CloseOutbound()
		<-h.rec.Done()
		_ = root.Close()
		// Every call any agent test made said who made it.
		if o := h.origins(); o[usage.OriginUnknown] > 0 {
			t.Errorf("%d model calls without an origin (usage.WithCall): %v", o[usage.OriginUnknown], o)
		}
		_ = h.ledger.Close()
		_ = h.store.Close()
	})
	return h
}

// send publishes a message from user "u1" in chat "c1" (or the given chat).
func (h *harness) send(chat, content string) {
	h.t.Helper()
	id := content
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

// waitFor waits until pred holds for the outbound messages so far.
func (h *harness) waitFor(what string, pred func([]bus.OutboundMessage) bool) []bus.OutboundMessage {
	h.t.Helper()
	return h.rec.WaitFor(h.t, what, pred)
}

// waitFinals waits for n final messages in chat and returns them.
func (h *harness) waitFinals(chat string, n int) []bus.OutboundMessage {
	h.t.Helper()
	out := h.waitFor("final messages", func(out []bus.OutboundMessage) bool { return len(bustest.Finals(out, chat)) >= n })
	return bustest.Finals(out, chat)
}

func (h *harness) messagesOfKind(chat string, k bus.Kind) []bus.OutboundMessage {
	var ms []bus.OutboundMessage
	for _, m := range h.rec.All() {
		if m.Kind == k && m.ChatID == chat {
			ms = append(ms, m)
		}
	}
	return ms
}

func (h *harness) writeFile(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// defaultConfig is the agent config of an empty config file, with workspace
// ws: what agentconfig.Defaults returns, which this package's own tests cannot
// import (it imports the agent). The agent defaults none of these fields.
func defaultConfig(ws, version string) Config {
	d := config.Defaults()
	return Config{
		Workspace:          ws,
		MaxToolIterations:  d.Agents.MaxToolIterations,
		MaxConcurrentTurns: d.Agents.MaxConcurrentTurns,
		MaxGroupTurns:      d.Agents.MaxGroupTurns,
		MaxTurnsPerGroup:   d.Agents.MaxTurnsPerGroup,
		MaxQueue:           d.Agents.MaxQueue,
		MaxTokens:          d.Agents.MaxTokens,
		MaxInputChars:      d.Agents.MaxInputChars,
		MemoryWindow:       d.Agents.MemoryWindow,
		HistoryBudget:      d.History.Budget,
		HistoryHighWater:   d.History.HighWater,
		HistoryLowWater:    d.History.LowWater,
		Version:            version,
	}
}

// origins counts the recorded model calls by origin.
func (h *harness) origins() map[usage.Origin]int64 {
	rep, err := h.ledger.Query(usage.Query{Period: usage.LastDays(h.ledger.Now(), h.ledger.Location(), 2), By: usage.ByOrigin})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[usage.Origin]int64{}
	for _, g := range rep.Groups {
		out[usage.Origin(g.Key)] = g.Calls
	}
	return out
}
