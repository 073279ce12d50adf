package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// protocolUnderTest is one wire API the alternating session visits: a
// strict fake of it, the provider entry that points at the fake, and the
// route /model selects it by. Adding a protocol is one entry in
// alternatingProtocols.
type protocolUnderTest struct {
	api   string // llm.Meta.API of its answers
	route string // name under routes
	model string // provider/model of the route
	// start starts the fake on script and returns the YAML entry under
	// providers: and a function listing what the fake refused.
	start func(t *testing.T, script *fakellm.Script) (entry string, rejected func() []string)
	// callIDs says whether the fake's model sends call ids (Gemini's
	// usually does not; the adapter makes its own).
	callIDs bool
	// replaysThinking: the protocol's own earlier reasoning must come back
	// to it on later calls (the Responses API's encrypted reasoning items).
	replaysThinking bool
}

var alternatingProtocols = []protocolUnderTest{
	{api: "openai", route: "oa", model: "openai/gpt-4o-mini", callIDs: true,
		start: func(t *testing.T, script *fakellm.Script) (string, func() []string) {
			srv := openaifake.New(t, script)
			return fmt.Sprintf("openai: {api_key: %q, base_url: %q, max_retries: 0}", openaifake.DefaultAPIKey, srv.URL()),
				func() (out []string) {
					for _, r := range srv.Rejected() {
						out = append(out, r.Message)
					}
					return out
				}
		}},
	{api: "anthropic", route: "claude", model: "anthropic/claude-sonnet-4-5", callIDs: true,
		start: func(t *testing.T, script *fakellm.Script) (string, func() []string) {
			srv := anthropicfake.New(t, script)
			return fmt.Sprintf("anthropic: {api_key: %q, base_url: %q, max_retries: 0}", anthropicfake.APIKey, srv.URL()),
				func() (out []string) {
					for _, r := range srv.Rejected() {
						out = append(out, r.Message)
					}
					return out
				}
		}},
	{api: "openai-responses", route: "resp", model: "responses/o4-mini", callIDs: true, replaysThinking: true,
		start: func(t *testing.T, script *fakellm.Script) (string, func() []string) {
			srv := openaifake.New(t, script)
			return fmt.Sprintf("responses: {kind: openai-responses, api_key: %q, base_url: %q, max_retries: 0}", openaifake.DefaultAPIKey, srv.URL()),
				func() (out []string) {
					for _, r := range srv.Rejected() {
						out = append(out, r.Message)
					}
					return out
				}
		}},
	{api: "gemini", route: "gem", model: "gemini/gemini-2.5-flash",
		start: func(t *testing.T, script *fakellm.Script) (string, func() []string) {
			srv := geminifake.New(t, script)
			return fmt.Sprintf("gemini: {api_key: %q, base_url: %q, max_retries: 0}", geminifake.APIKey, srv.URL()),
				func() (out []string) {
					for _, r := range srv.Rejected() {
						out = append(out, r.Message)
					}
					return out
				}
		}},
}

// One session moves between every protocol (issues 3 and 18): twice round
// alternatingProtocols, a tool-using turn with thinking on each. Every fake
// is strict about its API's rules — OpenAI's tool-message pairing,
// Anthropic's alternation, tool_result placement and thinking signatures,
// Gemini's function-response grouping and thought signatures — and must
// accept every request the shared, provider-neutral history turns into:
// each vendor's tool calls and thinking rendered acceptably for the next.
func TestOneSessionAlternatesBetweenProtocols(t *testing.T) {
	scripts := make([]*fakellm.Script, len(alternatingProtocols))
	rejected := make([]func() []string, len(alternatingProtocols))
	var entries, routes []string
	for i, pr := range alternatingProtocols {
		scripts[i] = &fakellm.Script{}
		var entry string
		entry, rejected[i] = pr.start(t, scripts[i])
		entries = append(entries, "  "+entry)
		routes = append(routes, fmt.Sprintf("  %s: {model: %s}", pr.route, pr.model))
	}
	home := t.TempDir()
	ws := filepath.Join(home, "workspace")
	yaml := fmt.Sprintf(`
agents: {workspace: %q, model: %s}
providers:
%s
routes:
%s
gateway: {heartbeat: {enabled: false}}
`, ws, alternatingProtocols[0].model, strings.Join(entries, "\n"), strings.Join(routes, "\n"))
	path := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core, err := Build(cfg, Options{Version: "test", DataDir: home}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("buy milk"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = core.RunAgent(ctx)
	}()
	t.Cleanup(func() {
		core.Bus.CloseInbound()
		<-agentDone
		cancel()
		core.Bus.CloseOutbound()
		_ = core.Close()
	})

	// ask sends text in one chat and returns the reply (the turn's final
	// message, or the command's answer).
	ask := func(text string) string {
		t.Helper()
		if err := core.Bus.PublishInbound(ctx, bus.InboundMessage{Channel: "cli", ChatID: "local", SenderID: "me", Content: text}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m := <-core.Bus.Outbound():
				if m.Delivered != nil {
					m.Delivered()
				}
				command := strings.HasPrefix(text, "/")
				if (command && m.Kind == bus.KindMessage) || (!command && m.Kind == bus.KindFinal) {
					return m.Content
				}
			case <-deadline:
				t.Fatalf("no reply to %q", text)
				return ""
			}
		}
	}

	const rounds = 2
	var wantAPIs []string
	for turn := range rounds * len(alternatingProtocols) {
		i := turn % len(alternatingProtocols)
		pr := alternatingProtocols[i]
		if got := ask("/model " + pr.route); !strings.Contains(got, pr.route) {
			t.Fatalf("/model %s = %q", pr.route, got)
		}
		id := func(n int) string {
			if !pr.callIDs {
				return ""
			}
			return fmt.Sprintf("%s_t%d_%d", pr.api, turn, n)
		}
		answer := fmt.Sprintf("%s (turn %d): still buy milk.", pr.api, turn)
		scripts[i].Push(
			fakellm.Reply{Thinking: fmt.Sprintf("%s reasons in round %d.", pr.api, turn/len(alternatingProtocols)), ToolCalls: []fakellm.Call{
				{ID: id(1), Name: "read_file", Args: `{"path":"notes.md"}`},
				{ID: id(2), Name: "list_dir", Args: `{"path":"."}`},
			}},
			fakellm.Reply{Thinking: "Done.", Text: answer})
		if got := ask(fmt.Sprintf("turn %d: what do my notes say?", turn)); got != answer {
			t.Fatalf("turn %d on %s = %q", turn, pr.api, got)
		}
		wantAPIs = append(wantAPIs, pr.api)
	}

	for i, pr := range alternatingProtocols {
		for _, r := range rejected[i]() {
			t.Errorf("the %s fake refused a request: %s", pr.api, r)
		}
		// The last request of each protocol carries every earlier turn's
		// two tool results, however its API groups them.
		reqs := scripts[i].Requests()
		last := reqs[len(reqs)-1]
		results := 0
		thought := false
		for _, m := range last.Messages {
			results += len(m.ToolResults)
			thought = thought || strings.Contains(m.Thinking, pr.api+" reasons in round 0")
		}
		if pr.replaysThinking && !thought {
			t.Errorf("%s's own reasoning of round 0 was not replayed to it", pr.api)
		}
		if want := 2 * (len(wantAPIs) - len(alternatingProtocols) + i + 1); results != want {
			t.Errorf("the last %s request holds %d tool results, want %d", pr.api, results, want)
		}
	}
	snap, err := core.Sessions.Get("cli:local")
	if err != nil {
		t.Fatal(err)
	}
	var apis []string
	for _, m := range snap.Messages {
		if m.Meta != nil && m.Meta.API != "" && m.Text() != "" {
			apis = append(apis, m.Meta.API)
		}
	}
	if strings.Join(apis, ",") != strings.Join(wantAPIs, ",") {
		t.Errorf("answers recorded from %v, want %v", apis, wantAPIs)
	}
}
