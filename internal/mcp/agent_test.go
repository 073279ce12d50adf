package mcp

import (
	"context"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/agent/agentconfig"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
)

// recorder is the scripted model, keeping every request as the agent made
// it (the fake's neutral form does not show a tool result's images).
type recorder struct {
	fakellm.Streamer
	mu   sync.Mutex
	reqs []llm.Request
}

func (r *recorder) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Streamer.Stream(ctx, req)
}

// toolResult finds the result of call id in the request n (0-based).
func (r *recorder) toolResult(t *testing.T, n int, id string) *llm.ToolResult {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if n >= len(r.reqs) {
		t.Fatalf("only %d model requests, want request %d", len(r.reqs), n+1)
	}
	for _, m := range r.reqs[n].Messages {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolResult && p.Result.ToolCallID == id {
				return p.Result
			}
		}
	}
	t.Fatalf("model request %d has no result for call %s", n+1, id)
	return nil
}

// agentRig is a real agent (sessions, registry, router) driven by the
// scripted model, with a manager connecting MCP servers into its registry.
type agentRig struct {
	*testRig
	script *fakellm.Script
	model  *recorder
	bus    *bus.Bus

	mu  sync.Mutex
	out []bus.OutboundMessage
}

func startAgent(t *testing.T, servers map[string]config.MCPServerConfig) *agentRig {
	t.Helper()
	log := zaptest.NewLogger(t)
	ws := t.TempDir()
	r := &agentRig{testRig: startManager(t, servers), script: &fakellm.Script{}, bus: bus.New(64)}
	r.model = &recorder{Streamer: fakellm.Streamer{Name: "openai", Script: r.script}}
	store := session.NewStore(filepath.Join(ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, log)
	router := provider.NewRouter(map[string]provider.Streamer{"openai": r.model},
		provider.Options{Default: "openai/gpt-4o-mini", MaxRetries: map[string]int{"openai": 0}}, log)
	acfg := agentconfig.Defaults(ws, "test")
	acfg.MaxTokens, acfg.DraftInterval = 1000, time.Nanosecond
	ag := agent.New(acfg,
		agent.Deps{Model: router, Sessions: store, Tools: r.reg, Out: r.bus, StatusLines: r.mgr.StatusLines,
			Prompt: &agent.PromptBuilder{Workspace: ws, Files: wstest.Files(t, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test"}}, log.Named("agent"))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = ag.Run(ctx, r.bus.Inbound()) })
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		for m := range r.bus.Outbound() {
			r.mu.Lock()
			r.out = append(r.out, m)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		r.bus.CloseInbound()
		wg.Wait() // the agent finishes its turns
		cancel()
		r.bus.CloseOutbound()
		<-outDone
		_ = store.Close()
	})
	return r
}

// ask sends text from the user and returns the turn's final reply.
func (r *agentRig) ask(text string) string {
	r.t.Helper()
	r.mu.Lock()
	seen := len(r.out)
	r.mu.Unlock()
	if err := r.bus.PublishInbound(context.Background(), bus.InboundMessage{
		Channel: "test", ChatID: "c1", SenderID: "u1", MessageID: text, Content: text}); err != nil {
		r.t.Fatal(err)
	}
	var reply string
	waitFor(r.t, "the reply to "+text, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range r.out[seen:] {
			if m.Kind == bus.KindFinal || m.Kind == bus.KindMessage {
				reply = m.Content
				return true
			}
		}
		return false
	})
	return reply
}

func TestAgentCallsMCPToolsEndToEnd(t *testing.T) {
	web := newHTTPServer(t)
	r := startAgent(t, map[string]config.MCPServerConfig{
		"web":   {URL: web.URL, ToolTimeout: 10 * time.Second},
		"local": stdioServer("stdio"),
	})
	r.waitState("web", StateConnected)
	r.waitState("local", StateConnected)

	r.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call1", Name: "mcp_web_echo", Args: `{"text":"hello"}`}}},
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call2", Name: "mcp_local_image", Args: `{}`}}},
		fakellm.Reply{Text: "done"},
	)
	if got := r.ask("use the tools"); got != "done" {
		t.Fatalf("reply %q, want done", got)
	}
	reqs := r.script.Requests()
	if offered := reqs[0].Tools; len(offered) != 32 || !slices.Contains(offered, "mcp_local_echo") || !slices.Contains(offered, "mcp_web_echo") {
		t.Errorf("the model was not offered the MCP tools: %v", reqs[0].Tools)
	}
	if res := r.model.toolResult(t, 1, "call1"); res.IsError || res.Content.Live != "echo: hello" {
		t.Errorf("the echo result in the next request: %+v", res)
	}
	res := r.model.toolResult(t, 2, "call2")
	if res.IsError || res.Content.Live != "a red dot" || len(res.Images) != 1 || res.Images[0].MIME != "image/png" {
		t.Errorf("the image result in the next request: %+v", res)
	}

	status := r.ask("/status")
	for _, want := range []string{"MCP local (stdio): connected, 16 tools", "MCP web (http): connected, 16 tools"} {
		if !strings.Contains(status, want) {
			t.Errorf("/status lacks %q:\n%s", want, status)
		}
	}
}

func TestAgentTurnSurvivesServerCrash(t *testing.T) {
	r := startAgent(t, map[string]config.MCPServerConfig{"local": stdioServer("stdio")})
	r.waitState("local", StateConnected)

	r.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "boom", Name: "mcp_local_crash", Args: `{}`}}},
		fakellm.Reply{Text: "the tool server crashed"},
	)
	if got := r.ask("crash it"); got != "the tool server crashed" {
		t.Fatalf("reply %q: the turn did not continue after the crash", got)
	}
	res := r.model.toolResult(t, 1, "boom")
	if !res.IsError || !strings.Contains(res.Content.Live, `the connection to the MCP server "local" failed`) {
		t.Errorf("the crash result the model saw: %+v", res)
	}

	r.retryNow("local")
	r.waitState("local", StateConnected)
	r.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "again", Name: "mcp_local_echo", Args: `{"text":"back"}`}}},
		fakellm.Reply{Text: "ok"},
	)
	if got := r.ask("try again"); got != "ok" {
		t.Fatalf("reply %q", got)
	}
	if res := r.model.toolResult(t, 3, "again"); res.IsError || res.Content.Live != "echo: back" {
		t.Errorf("echo after the reconnection: %+v", res)
	}
}
