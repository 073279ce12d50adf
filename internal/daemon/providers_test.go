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
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/openaifake"
)

// protocolFake is one wire protocol's strict fake as the alternation test
// needs it.
type protocolFake struct {
	url, key string
	script   *fakellm.Script
	// rejected describes every request the fake refused.
	rejected func() []string
}

// alternationProtocol is one entry of the alternation table: a provider of
// one kind behind a route of the same name.
type alternationProtocol struct {
	name   string // provider and route name, used with /model
	kind   string // providers.<name>.kind, also the API recorded in llm.Meta
	model  string
	callID string // prefix of the tool-call ids this vendor makes
	// replaysThinking: the protocol's own earlier reasoning must come back to
	// it on later calls (encrypted reasoning, signatures).
	replaysThinking bool
	start           func(t *testing.T) protocolFake
}

// alternationProtocols are the wire protocols one session moves between. To
// add a protocol, append one entry.
var alternationProtocols = []alternationProtocol{
	{name: "openai", kind: "openai", model: "gpt-4o-mini", callID: "call_", start: func(t *testing.T) protocolFake {
		s := &fakellm.Script{}
		srv := openaifake.New(t, s)
		return protocolFake{srv.URL(), openaifake.DefaultAPIKey, s, func() []string { return describe(srv.Rejected()) }}
	}},
	{name: "anthropic", kind: "anthropic", model: "claude-sonnet-4-5", callID: "toolu_", start: func(t *testing.T) protocolFake {
		s := &fakellm.Script{}
		srv := anthropicfake.New(t, s)
		return protocolFake{srv.URL(), anthropicfake.APIKey, s, func() []string { return describe(srv.Rejected()) }}
	}},
	{name: "responses", kind: "openai-responses", model: "o4-mini", callID: "call_r", replaysThinking: true, start: func(t *testing.T) protocolFake {
		s := &fakellm.Script{}
		srv := openaifake.New(t, s)
		return protocolFake{srv.URL(), openaifake.DefaultAPIKey, s, func() []string { return describe(srv.Rejected()) }}
	}},
}

func describe[R any](rs []R) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%+v", r)
	}
	return out
}

// One session moves between every protocol of alternationProtocols, twice
// round, over tool-using turns with reasoning (issues 3 and 18). Every fake is
// strict about its API's rules — OpenAI's tool-message pairing, Anthropic's
// alternation, tool_result placement and thinking signatures, the Responses
// API's item order and encrypted reasoning — and must accept every request
// the shared, provider-neutral history turns into.
func TestOneSessionAlternatesBetweenProtocols(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(home, "workspace")
	fakes := make([]protocolFake, len(alternationProtocols))
	var providers, routes strings.Builder
	for i, p := range alternationProtocols {
		fakes[i] = p.start(t)
		fmt.Fprintf(&providers, "  %s: {kind: %s, api_key: %q, base_url: %q, max_retries: 0}\n", p.name, p.kind, fakes[i].key, fakes[i].url)
		fmt.Fprintf(&routes, "  %s: {model: %s/%s}\n", p.name, p.name, p.model)
	}
	first := alternationProtocols[0]
	yaml := fmt.Sprintf("agents: {workspace: %q, model: %s/%s}\nproviders:\n%sroutes:\n%sgateway: {heartbeat: {enabled: false}}\n",
		ws, first.name, first.model, providers.String(), routes.String())
	path := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
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
	turn := 0
	for round := range rounds {
		for i, p := range alternationProtocols {
			turn++
			if got := ask("/model " + p.name); !strings.Contains(got, p.name) {
				t.Fatalf("/model %s = %q", p.name, got)
			}
			id := fmt.Sprintf("%s%d", p.callID, turn)
			thinking := fmt.Sprintf("%s reasons in round %d.", p.name, round)
			answer := fmt.Sprintf("%s answers turn %d.", p.name, turn)
			fakes[i].script.Push(
				fakellm.Reply{Thinking: thinking, ToolCalls: []fakellm.Call{
					{ID: id + "a", Name: "read_file", Args: `{"path":"notes.md"}`},
					{ID: id + "b", Name: "list_dir", Args: `{"path":"."}`},
				}},
				fakellm.Reply{Thinking: "Done.", Text: answer},
			)
			if got := ask(fmt.Sprintf("turn %d: what do my notes say?", turn)); got != answer {
				t.Fatalf("turn %d (%s) = %q", turn, p.name, got)
			}
			wantAPIs = append(wantAPIs, p.kind)
		}
	}

	for i, p := range alternationProtocols {
		for _, r := range fakes[i].rejected() {
			t.Errorf("%s fake refused a request: %s", p.name, r)
		}
		// The protocol's last request (in its last turn) carries every tool
		// result of the session so far, two per turn, however the protocol
		// groups them.
		reqs := fakes[i].script.Requests()
		last := reqs[len(reqs)-1]
		results := 0
		thought := false
		for _, m := range last.Messages {
			results += len(m.ToolResults)
			thought = thought || strings.Contains(m.Thinking, p.name+" reasons in round 0")
		}
		if want := 2 * ((rounds-1)*len(alternationProtocols) + i + 1); results != want {
			t.Errorf("%s's last request holds %d tool results, want %d", p.name, results, want)
		}
		if p.replaysThinking && !thought {
			t.Errorf("%s's own reasoning of round 0 was not replayed to it", p.name)
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
	if got, want := strings.Join(apis, ","), strings.Join(wantAPIs, ","); got != want {
		t.Errorf("answers recorded from %s, want %s", got, want)
	}
}
