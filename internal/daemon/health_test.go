package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/health"
)

// Goroutine leaks are checked for the whole test binary by TestMain in
// harness_test.go.

const user = 42 // the allowlisted Telegram user; their DM chat has the same id

// liveGateway is a running in-process gateway with its HTTP base URL.
type liveGateway struct {
	base   string
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// startLiveGateway runs the gateway on cfgYAML (with %s for the workspace)
// until the test ends.
func startLiveGateway(t *testing.T, cfgYAML string) *liveGateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(cfgYAML, filepath.Join(dir, "workspace"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := daemon.NewGateway(cfg, daemon.Options{Version: "v0.0.0-test", DataDir: dir, Listener: ln}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw := &liveGateway{base: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}},
		cancel: cancel, done: make(chan error, 1)}
	go func() { gw.done <- g.Run(ctx) }()
	t.Cleanup(func() {
		gw.stop(t)
		gw.client.CloseIdleConnections()
	})
	return gw
}

// stop cancels the gateway as a signal does and checks it ends cleanly.
func (g *liveGateway) stop(t *testing.T) {
	t.Helper()
	g.cancel()
	select {
	case err, ok := <-g.done:
		if ok && err != nil {
			t.Errorf("Run after a clean stop: %v", err)
		}
		if ok {
			close(g.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not stop within 30s")
	}
}

func (g *liveGateway) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := g.client.Get(g.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitReady polls /readyz until its readiness is want; it returns the last
// report.
func (g *liveGateway) waitReady(t *testing.T, want bool) health.Report {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := g.get(t, "/readyz")
		var r health.Report
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz body is not JSON: %s", body)
		}
		if (code == 200) != r.Ready {
			t.Fatalf("/readyz status %d disagrees with its body %s", code, body)
		}
		if r.Ready == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never became ready=%v; last: %d %s", want, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const telegramConfig = `
agents:
  workspace: %%s
  model: openai/gpt-4o-mini
providers:
  openai: {api_key: %q, base_url: %q}
channels:
  telegram:
    enabled: true
    token: %q
    api_url: %q
    allow_from: ["%d"]
    poll_timeout: 1s
    streaming: false
gateway:
  shutdown_grace: 5s
  heartbeat: {enabled: false}
`

func TestReadinessFollowsTelegramAndMetricsCountATurn(t *testing.T) {
	tg := telegramfake.New(t)
	link := newOutage(t, tg.URL())
	script := &fakellm.Script{}
	llm := openaifake.New(t, script)
	g := startLiveGateway(t, fmt.Sprintf(telegramConfig, openaifake.DefaultAPIKey, llm.URL(), telegramfake.Token, link.URL(), user))

	if code, body := g.get(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	r := g.waitReady(t, true)
	if names := checkNames(r); names != "telegram,model" {
		t.Errorf("checks = %s, want telegram and model", names)
	}

	link.Down()
	r = g.waitReady(t, false)
	if failing := failingChecks(r); !strings.HasPrefix(failing, "telegram: ") {
		t.Errorf("failing checks while Telegram is away = %q", failing)
	}
	if code, body := g.get(t, "/metrics"); code != 200 || !strings.Contains(body, `nanobot_channel_up{channel="telegram"} 0`) {
		t.Errorf("/metrics does not show telegram down:\n%s", grep(body, "channel_up"))
	}
	link.Up()
	g.waitReady(t, true)

	script.Push(fakellm.Reply{Text: "Hello there!", InputTokens: 120, OutputTokens: 7})
	tg.PushMessage(models.Message{Chat: models.Chat{ID: user, Type: models.ChatTypePrivate},
		From: &models.User{ID: user, FirstName: "U"}, Text: "hi"})
	tg.Wait(t, "the answer", func() bool { return len(tg.Visible(user)) == 1 })

	// The final is sent before the turn's bookkeeping ends: poll.
	want := []string{
		`nanobot_turns_total{outcome="answered"} 1`,
		`nanobot_llm_calls_total{outcome="ok",route="openai/gpt-4o-mini"} 1`,
		`nanobot_llm_tokens_total{kind="input",model="openai/gpt-4o-mini",route="openai/gpt-4o-mini"} 120`,
		`nanobot_llm_tokens_total{kind="output",model="openai/gpt-4o-mini",route="openai/gpt-4o-mini"} 7`,
		`nanobot_turn_duration_seconds_count{outcome="answered"} 1`,
		`nanobot_llm_call_duration_seconds_count{route="openai/gpt-4o-mini"} 1`,
		`nanobot_channel_calls_total{channel="telegram",op="send",outcome="ok"} 1`,
		`nanobot_channel_up{channel="telegram"} 1`,
		`nanobot_bus_queue_depth{queue="inbound"} 0`,
		`nanobot_sessions_cached 1`,
		`nanobot_build_info{goversion="` + runtime.Version() + `",version="v0.0.0-test"} 1`,
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := g.get(t, "/metrics")
		missing := missingLines(body, want)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks:\n%s\nnanobot metrics:\n%s", strings.Join(missing, "\n"), grep(body, "nanobot_"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	g.stop(t)
	if _, err := g.client.Get(g.base + "/healthz"); err == nil {
		t.Error("the listener still answers after Run returned")
	}
}

func TestModelFailureMakesItUnreadyUntilACallSucceeds(t *testing.T) {
	tg := telegramfake.New(t)
	script := &fakellm.Script{}
	llm := openaifake.New(t, script)
	cfg := strings.Replace(telegramConfig, "model: openai/gpt-4o-mini", "model: openai/gpt-4o-mini\n  fallbacks: []", 1)
	cfg = strings.Replace(cfg, "openai: {api_key: %q, base_url: %q}", "openai: {api_key: %q, base_url: %q, max_retries: 0}", 1)
	g := startLiveGateway(t, fmt.Sprintf(cfg, openaifake.DefaultAPIKey, llm.URL(), telegramfake.Token, tg.URL(), user))
	g.waitReady(t, true)

	say := func(text string) {
		tg.PushMessage(models.Message{Chat: models.Chat{ID: user, Type: models.ChatTypePrivate},
			From: &models.User{ID: user, FirstName: "U"}, Text: text})
	}
	script.Push(fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded"})
	say("one")
	tg.Wait(t, "the error reply", func() bool { return len(tg.Visible(user)) == 1 })
	r := g.waitReady(t, false)
	if failing := failingChecks(r); !strings.HasPrefix(failing, "model: the last model call") || !strings.Contains(failing, "503") {
		t.Errorf("failing checks = %q, want the model's 503", failing)
	}
	script.Push(fakellm.Reply{Text: "fine again"})
	say("two")
	g.waitReady(t, true)
}

func checkNames(r health.Report) string {
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func failingChecks(r health.Report) string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Error)
		}
	}
	return strings.Join(out, "; ")
}

func missingLines(body string, want []string) []string {
	var missing []string
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			missing = append(missing, w)
		}
	}
	return missing
}

func grep(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// outage is a TCP proxy in front of a fake server that can go away (new
// connections refused, open ones cut) and come back on the same address,
// as a platform does in a network blip.
type outage struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newOutage(t *testing.T, targetURL string) *outage {
	t.Helper()
	target := strings.TrimPrefix(targetURL, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	o.serve(ln)
	t.Cleanup(o.Down)
	return o
}

// URL is the proxy's base URL, to use instead of the target's.
func (o *outage) URL() string { return "http://" + o.addr }

func (o *outage) serve(ln net.Listener) {
	o.mu.Lock()
	o.ln = ln
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.pipe(c)
		}
	}()
}

func (o *outage) pipe(c net.Conn) {
	up, err := net.Dial("tcp", o.target)
	if err != nil {
		c.Close()
		return
	}
	o.mu.Lock()
	o.conns[c], o.conns[up] = struct{}{}, struct{}{}
	o.mu.Unlock()
	o.wg.Add(2)
	copyAndClose := func(dst, src net.Conn) {
		defer o.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go copyAndClose(up, c)
	go copyAndClose(c, up)
}

// Down refuses new connections and cuts the open ones.
func (o *outage) Down() {
	o.mu.Lock()
	if o.ln != nil {
		o.ln.Close()
		o.ln = nil
	}
	for c := range o.conns {
		c.Close()
		delete(o.conns, c)
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// Up listens on the same address again.
func (o *outage) Up() {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		o.t.Fatalf("outage: listen again on %s: %v", o.addr, err)
	}
	o.serve(ln)
}
