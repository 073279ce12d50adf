package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/agent/agentconfig"
	"github.com/nanobot-go/nanobot/internal/api"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The tests run the API in front of a real agent (sessions, tools, router
// with the scripted in-process model) and a real channel manager, as the
// gateway wires them, and talk to it over HTTP with go-openai and raw
// requests.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	webuiToken  = "sk-nanobot-webui-0123456789"
	scriptToken = "sk-nanobot-script-0123456789"
)

type harness struct {
	t *testing.T
	// top is the test's directory; ws, the workspace, is top/home/workspace.
	top    string
	ws     string
	script *fakellm.Script
	store  *session.Store
	srv    *api.Server
	// logs holds every line the API and the agent logged.
	logs *observer.ObservedLogs
	// stop shuts everything down as the gateway does (once); intakeDone
	// is closed when the API refuses new requests.
	stop       func()
	intakeDone chan struct{}
	url        string
	// now is the API's clock (rate limits); tests move it.
	mu  sync.Mutex
	now time.Time
}

func baseConfig() config.APIConfig {
	return config.APIConfig{
		Keys:          map[string]string{"webui": webuiToken, "script": scriptToken},
		RatePerMinute: 600, Burst: 100, MaxConcurrent: 8, MaxBodyBytes: 64 << 10,
		MaxHistoryMessages: 1000, MaxHistoryBytes: 1 << 20, MaxImages: 16,
		TurnTimeout: time.Minute, ToolHints: true,
	}
}

func newHarness(t *testing.T, tweak ...func(*config.APIConfig)) *harness {
	t.Helper()
	cfg := baseConfig()
	for _, f := range tweak {
		f(&cfg)
	}
	// The workspace sits two levels below the test's directory, so a write
	// that climbs out of it (issue 28) still lands where the test looks.
	top := t.TempDir()
	ws := filepath.Join(top, "home", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, top: top, ws: ws, script: &fakellm.Script{}, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	core, logs := observer.New(zap.DebugLevel)
	h.logs = logs
	log := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, core)
	})), zaptest.Level(zap.DebugLevel))
	b := bus.New(64)
	h.store = session.NewStore(filepath.Join(ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, log)
	root, err := workspace.OpenRoot(ws, workspace.Options{Restrict: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry(tools.RegistryOptions{Timeout: 5 * time.Second, MaxOutput: config.Defaults().Agents.MaxToolOutput}, log)
	for _, tool := range []tools.Tool{tools.NewReadFile(root), tools.NewListDir(root),
		tools.NewMessage(b, func(string, string) bool { return false }, root)} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	router := provider.NewRouter(map[string]provider.Streamer{"openai": &fakellm.Streamer{Name: "openai", Script: h.script}},
		provider.Options{Default: "openai/gpt-4o-mini", Routes: map[string]provider.RouteSpec{"smart": {Model: "openai/gpt-4.1"}},
			MaxRetries: map[string]int{"openai": 0}}, log.Named("router"))
	acfg := agentconfig.Defaults(ws, "test")
	acfg.MaxTokens, acfg.DraftInterval = 1000, time.Nanosecond
	ag := agent.New(acfg,
		agent.Deps{Model: router, Sessions: h.store, Tools: reg, Out: b,
			Prompt: &agent.PromptBuilder{Workspace: ws, Files: wstest.Files(t, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test", Skills: skills.Loader{}}}, log.Named("agent"))
	h.srv = api.New(cfg, api.Deps{Bus: b, Routes: []string{"smart"}, Clock: clock.Func(h.clock)}, log.Named("api"))
	mgr := channels.NewManager(b.Outbound(), channels.ManagerConfig{}, log.Named("channels"))
	if err := mgr.RegisterReceiver(api.Channel, h.srv); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h.srv.Handler())
	h.url = ts.URL

	intake, stopIntake := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	apiDone := make(chan struct{})
	agentDone := make(chan struct{})
	mgrDone := make(chan struct{})
	wg.Go(func() { defer close(apiDone); _ = h.srv.Run(intake) })
	wg.Go(func() { defer close(agentDone); _ = ag.Run(context.Background(), b.Inbound()) })
	wg.Go(func() { defer close(mgrDone); _ = mgr.Run(context.Background()) })
	h.intakeDone = apiDone
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			// The gateway's order: stop intake, let the agent finish, deliver
			// the replies, end what still waits, close the listener.
			stopIntake()
			<-apiDone
			b.CloseInbound()
			<-agentDone
			b.CloseOutbound()
			<-mgrDone
			h.srv.Close()
			ts.Close() // waits for the handlers, as the gateway's Shutdown does
			wg.Wait()
			_ = h.store.Close()
			_ = root.Close()
		})
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// client is a go-openai client for token, on its own transport so that its
// connections are closed before the leak check.
func (h *harness) client(token string) *openai.Client {
	cfg := openai.DefaultConfig(token)
	cfg.BaseURL = h.url + "/v1"
	tr := &http.Transport{}
	h.t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: tr}
	return openai.NewClientWithConfig(cfg)
}

// session reads key's session as a restarted store would.
func (h *harness) session(key string) []llm.Message {
	h.t.Helper()
	store := session.NewStore(filepath.Join(h.ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, zaptest.NewLogger(h.t))
	defer func() { _ = store.Close() }()
	snap, err := store.Get(key)
	if err != nil {
		h.t.Fatalf("session %s: %v", key, err)
	}
	return snap.Messages
}

func (h *harness) sessionFiles() []string {
	h.t.Helper()
	files, _ := filepath.Glob(filepath.Join(h.ws, "sessions", "*"))
	return files
}

func (h *harness) writeFile(rel, content string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.ws, rel), []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// waitUntil polls cond until it holds, failing after 10 s.
func (h *harness) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
