package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/sandbox"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// The tests of this package run the whole gateway in-process — real agent,
// sessions, tools, router, OpenAI adapter, channel manager, Telegram and
// Discord adapters — against the fake servers over real HTTP and WebSocket.
// This file is their harness; every test ends with no goroutine left over.

// The test binary stands in for nanobot's sandbox launcher: the gateways
// these tests build start exec's commands through os.Executable().
func TestMain(m *testing.M) {
	sandbox.MaybeLaunch()
	goleak.VerifyTestMain(m)
}

const (
	owner    = 100 // the allowlisted Telegram user
	stranger = 666
)

// setup shapes one gateway's configuration: each field is YAML lines added
// under its section (indentation is added here).
type setup struct {
	discord  bool
	agents   string // under agents:
	openai   string // under providers.openai: (max_retries: 0 unless set)
	telegram string // under channels.telegram:
	tools    string // under tools:
	// quiet logs nothing: zaptest keeps every line in memory until the test
	// ends, which a memory measurement must not count.
	quiet bool
	// noTelegram sets channels.telegram.enabled: false.
	noTelegram bool
	// noWeb sets channels.web.enabled: false.
	noWeb bool
	// apiKey replaces providers.openai.api_key (the fake's key), e.g.
	// "${UNSET}" or a key the fake refuses.
	apiKey string
	// gemini makes gemini/gemini-2.5-flash the model, served by a strict
	// fake Gemini server answering from the same script; the openai lines
	// then go under providers.gemini.
	gemini bool
	// providers are YAML lines added under providers: (more providers).
	providers string
}

type gw struct {
	t       testing.TB
	home    string
	cfg     *config.Config
	script  *fakellm.Script
	llm     *openaifake.Server
	gem     *geminifake.Server
	tg      *telegramfake.Server
	dc      *discordfake.Server
	dcOwner discordfake.User
	// tgURL is where the gateway reaches Telegram: the fake, unless a test
	// puts a proxy in between before writeConfig.
	tgURL  string
	cancel context.CancelFunc
	done   chan error
	log    *zap.Logger
	// base is the gateway's HTTP listener (/healthz, /readyz, /metrics).
	base   string
	client *http.Client
	// role is the gateway's --role ("" is all).
	role string
	// gateway is the running gateway, for tests that reach into it.
	gateway *Gateway
}

// startGateway writes a config pointing at fresh fakes, then runs the gateway
// until the test ends. extra is YAML appended at the top level.
func startGateway(t *testing.T, withDiscord bool, extra string) *gw {
	t.Helper()
	g := newGW(t, setup{discord: withDiscord})
	g.writeConfig(setup{discord: withDiscord}, extra)
	g.start()
	return g
}

// start runs the gateway with s.
func startWith(t *testing.T, s setup) *gw {
	t.Helper()
	g := newGW(t, s)
	g.writeConfig(s, "")
	g.start()
	return g
}

func newGW(t testing.TB, s setup) *gw {
	t.Helper()
	g := &gw{t: t, script: &fakellm.Script{}, home: t.TempDir(), log: zaptest.NewLogger(t)}
	if s.quiet {
		g.log = zap.NewNop()
	}
	g.llm = openaifake.New(t, g.script)
	if s.gemini {
		g.gem = geminifake.New(t, g.script)
	}
	g.tg = telegramfake.New(t)
	g.tgURL = g.tg.URL()
	if s.discord {
		g.dc = discordfake.New(t, discordfake.Options{})
		g.dcOwner = g.dc.NewUser("owner")
	}
	return g
}

func indent(lines, by string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(by + strings.TrimSpace(l) + "\n")
		}
	}
	return b.String()
}

// indentYAML indents every line of lines by by, keeping the lines' own
// indentation (for nested YAML).
func indentYAML(lines, by string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.Trim(lines, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(by + l + "\n")
		}
	}
	return b.String()
}

func (g *gw) writeConfig(s setup, extra string) {
	g.t.Helper()
	openai := s.openai
	if !strings.Contains(openai, "max_retries") {
		openai += "\nmax_retries: 0"
	}
	model, gemini := "openai/gpt-4o-mini", ""
	if s.gemini {
		model = "gemini/gemini-2.5-flash"
		gemini = fmt.Sprintf("  gemini:\n    api_key: %q\n    base_url: %q\n%s", geminifake.APIKey, g.gem.URL(), indent(openai, "    "))
		openai = "max_retries: 0"
	}
	var discord string
	if s.discord {
		discord = fmt.Sprintf("  discord: {enabled: true, token: %q, api_url: %q, allow_from: [%q], edit_interval: 10ms}\n",
			g.dc.Token(), g.dc.URL(), g.dcOwner.ID)
	}
	if s.noWeb {
		discord += "  web: {enabled: false}\n"
	}
	tools := ""
	if s.tools != "" {
		tools = "tools:\n" + indent(s.tools, "  ")
	}
	yaml := fmt.Sprintf(`agents:
  workspace: %s/workspace
  model: %s
%sproviders:
  openai:
    api_key: %q
    base_url: %q
%s%s%schannels:
  telegram:
    enabled: %v
    token: %q
    api_url: %q
%s    edit_interval: 10ms
%s%s%sgateway:
  listen: 127.0.0.1:0
  shutdown_grace: 5s
  heartbeat: {enabled: false}
`, g.home, model, indent(s.agents, "  "), openaifake.DefaultAPIKey, g.llm.URL(), indent(openai, "    "), gemini, indentYAML(s.providers, "  "),
		!s.noTelegram, telegramfake.Token, g.tgURL, allowFrom(s.telegram), indent(s.telegram, "    "), discord, tools)
	yaml += extra
	if s.apiKey != "" {
		yaml = strings.Replace(yaml, fmt.Sprintf("api_key: %q", openaifake.DefaultAPIKey), "api_key: "+s.apiKey, 1)
	}
	if err := os.WriteFile(g.configPath(), []byte(yaml), 0o600); err != nil {
		g.t.Fatal(err)
	}
	cfg, err := LoadConfig(g.configPath())
	if err != nil {
		g.t.Fatalf("config: %v\n%s", err, yaml)
	}
	if err := cfg.Validate(); err != nil {
		g.t.Fatalf("config: %v\n%s", err, yaml)
	}
	g.cfg = cfg
}

// allowFrom lets in owner and owner+1 unless the test sets its own list.
func allowFrom(telegram string) string {
	if strings.Contains(telegram, "allow_from") {
		return ""
	}
	return fmt.Sprintf("    allow_from: [\"%d\", \"%d\"]\n", owner, owner+1)
}

func (g *gw) configPath() string { return filepath.Join(g.home, "config.yaml") }

// start runs the gateway on g.cfg until stop or the end of the test.
func (g *gw) start() {
	g.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	g.base = "http://" + ln.Addr().String()
	gateway, err := NewGateway(g.cfg, Options{Version: "test", DataDir: g.home, Listener: ln, Role: g.role}, g.log)
	if err != nil {
		_ = ln.Close()
		g.t.Fatal(err)
	}
	g.gateway = gateway
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan error, 1)
	go func() { g.done <- gateway.Run(ctx) }()
	g.t.Cleanup(func() {
		if err := g.stop(); err != nil {
			g.t.Errorf("gateway: %v", err)
		}
	})
}

// stop shuts the gateway down (as SIGTERM does) and waits for it.
func (g *gw) stop() error {
	if g.cancel == nil {
		return nil
	}
	g.cancel()
	g.cancel = nil
	select {
	case err := <-g.done:
		return err
	case <-time.After(20 * time.Second):
		return fmt.Errorf("gateway did not stop within 20s")
	}
}

// visible waits until chat shows n messages and returns their visible text.
func (g *gw) visible(chat int64, n int) []string {
	g.t.Helper()
	g.tg.Wait(g.t, fmt.Sprintf("%d visible messages in chat %d", n, chat), func() bool {
		return len(g.tg.Visible(chat)) >= n
	})
	return g.tg.Visible(chat)
}

// waitLast waits until the last visible message in chat reads want.
func (g *gw) waitLast(chat int64, want string) {
	g.t.Helper()
	g.tg.Wait(g.t, fmt.Sprintf("chat %d to show %q", chat, want), func() bool {
		v := g.tg.Visible(chat)
		return len(v) > 0 && v[len(v)-1] == want
	})
}

// waitPrefix waits until the last visible message in chat starts with prefix.
func (g *gw) waitPrefix(chat int64, prefix string) {
	g.t.Helper()
	g.tg.Wait(g.t, fmt.Sprintf("chat %d to show %q…", chat, prefix), func() bool {
		v := g.tg.Visible(chat)
		return len(v) > 0 && strings.HasPrefix(v[len(v)-1], prefix)
	})
}

// dcWaitLast waits until the last message in a Discord channel reads want.
func (g *gw) dcWaitLast(channel, want string) {
	g.t.Helper()
	g.dc.WaitFor(g.t, fmt.Sprintf("channel %s to show %q", channel, want), func() bool {
		ms := g.dc.Messages(channel)
		return len(ms) > 0 && ms[len(ms)-1].Content == want
	})
}

// sessionValid checks every line of every session file parses.
func (g *gw) sessionValid() {
	g.t.Helper()
	files, _ := filepath.Glob(filepath.Join(g.cfg.Agents.SessionsDir, "*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			g.t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				g.t.Errorf("%s: invalid line %q", f, sc.Text())
			}
		}
		_ = fh.Close()
	}
}

// sessionMessages reads key's session file as the store would after a
// restart, failing the test on any line the store would not accept.
func (g *gw) sessionMessages(key string) []llm.Message {
	g.t.Helper()
	g.sessionValid()
	store := session.NewStore(g.cfg.Agents.SessionsDir, session.Options{}, zaptest.NewLogger(g.t))
	defer func() { _ = store.Close() }()
	snap, err := store.Get(key)
	if err != nil {
		g.t.Fatalf("session %s: %v", key, err)
	}
	for i, m := range snap.Messages {
		if err := m.Validate(); err != nil {
			g.t.Errorf("session %s message %d: %v", key, i, err)
		}
	}
	return snap.Messages
}

// roles is the sequence of roles of msgs, comma-separated.
func roles(msgs []llm.Message) string {
	r := make([]string, len(msgs))
	for i, m := range msgs {
		r[i] = string(m.Role)
	}
	return strings.Join(r, ",")
}

// waitUntil polls cond (for conditions no fake signals, like the model's
// request log) until it holds, failing the test after 10 s.
func (g *gw) waitUntil(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// get fetches path from the gateway's HTTP listener.
func (g *gw) get(path string) (int, string) {
	g.t.Helper()
	if g.client == nil {
		// Its own transport, so its idle connections can be closed before
		// the leak check.
		g.client = &http.Client{Transport: &http.Transport{}}
		g.t.Cleanup(g.client.CloseIdleConnections)
	}
	resp, err := g.client.Get(g.base + path)
	if err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitReady polls /readyz until its readiness is want; it returns the last
// report.
func (g *gw) waitReady(want bool) health.Report {
	g.t.Helper()
	// A channel's recovery waits for its reconnect backoff: longer than
	// waitUntil's 10 s.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := g.get("/readyz")
		var r health.Report
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			g.t.Fatalf("/readyz body is not JSON: %s", body)
		}
		if (code == 200) != r.Ready {
			g.t.Fatalf("/readyz status %d disagrees with its body %s", code, body)
		}
		if r.Ready == want {
			return r
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("/readyz never became ready=%v; last: %d %s", want, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
