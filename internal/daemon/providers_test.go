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

// One session alternates between an OpenAI route and an Anthropic route over
// several tool-using turns (issue 3). Both fakes are strict about their
// API's rules — OpenAI's tool-message pairing, Anthropic's alternation,
// tool_result placement and thinking signatures — and must accept every
// request the shared, provider-neutral history turns into.
func TestOneSessionAlternatesBetweenOpenAIAndAnthropic(t *testing.T) {
	oa, an := &fakellm.Script{}, &fakellm.Script{}
	oaSrv := openaifake.New(t, oa)
	anSrv := anthropicfake.New(t, an)
	home := t.TempDir()
	ws := filepath.Join(home, "workspace")
	yaml := fmt.Sprintf(`
agents: {workspace: %q, model: openai/gpt-4o-mini}
providers:
  openai: {api_key: %q, base_url: %q, max_retries: 0}
  anthropic: {api_key: %q, base_url: %q, max_retries: 0}
routes:
  claude: {model: anthropic/claude-sonnet-4-5}
gateway: {heartbeat: {enabled: false}}
`, ws, openaifake.DefaultAPIKey, oaSrv.URL(), anthropicfake.APIKey, anSrv.URL())
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
	readNotes := func(id string) fakellm.Call {
		return fakellm.Call{ID: id, Name: "read_file", Args: `{"path":"notes.md"}`}
	}
	listDir := func(id string) fakellm.Call { return fakellm.Call{ID: id, Name: "list_dir", Args: `{"path":"."}`} }

	oa.Push(fakellm.Reply{ToolCalls: []fakellm.Call{readNotes("call_a1"), listDir("call_a2")}}, fakellm.Reply{Text: "OpenAI: your note says buy milk."})
	if got := ask("what do my notes say?"); got != "OpenAI: your note says buy milk." {
		t.Fatalf("turn 1 = %q", got)
	}
	if got := ask("/model claude"); !strings.Contains(got, "claude") {
		t.Fatalf("/model claude = %q", got)
	}
	an.Push(fakellm.Reply{Thinking: "The user asks again.", ToolCalls: []fakellm.Call{readNotes("toolu_b1"), listDir("toolu_b2")}},
		fakellm.Reply{Thinking: "Done.", Text: "Anthropic: still buy milk."})
	if got := ask("and now?"); got != "Anthropic: still buy milk." {
		t.Fatalf("turn 2 = %q", got)
	}
	if got := ask("/model default"); !strings.Contains(got, "gpt-4o-mini") {
		t.Fatalf("/model default = %q", got)
	}
	oa.Push(fakellm.Reply{ToolCalls: []fakellm.Call{listDir("call_c1")}}, fakellm.Reply{Text: "OpenAI again."})
	if got := ask("list the files"); got != "OpenAI again." {
		t.Fatalf("turn 3 = %q", got)
	}
	ask("/model claude")
	an.Push(fakellm.Reply{Text: "Anthropic again."})
	if got := ask("one more"); got != "Anthropic again." {
		t.Fatalf("turn 4 = %q", got)
	}

	for _, r := range oaSrv.Rejected() {
		t.Errorf("OpenAI fake refused a request: %+v", r)
	}
	for _, r := range anSrv.Rejected() {
		t.Errorf("Anthropic fake refused a request: %+v", r)
	}
	// The last Anthropic request carries all three earlier turns: OpenAI's
	// two tool results as ONE user message, its own thinking replayed.
	last := an.Requests()[len(an.Requests())-1]
	var toolTurns, userTexts int
	for _, m := range last.Messages {
		if len(m.ToolResults) > 0 {
			toolTurns++
			if m.Role != "user" {
				t.Errorf("Anthropic tool results in a %s message", m.Role)
			}
		}
		if m.Role == "user" && strings.Contains(m.Text, "?") {
			userTexts++
		}
	}
	if toolTurns != 3 {
		t.Errorf("Anthropic saw %d tool-result messages, want 3 (one per tool-using model turn)", toolTurns)
	}
	// The OpenAI request of turn 3 renders the same history as one tool
	// message per result.
	var third fakellm.Request
	for _, r := range oa.Requests() {
		if strings.Contains(r.LastUserText(), "list the files") {
			third = r
			break
		}
	}
	var toolMsgs int
	for _, m := range third.Messages {
		if m.Role == "tool" {
			toolMsgs++
		}
	}
	if toolMsgs != 4 {
		t.Errorf("OpenAI saw %d tool messages, want 4 (two results of turn 1, two of turn 2)", toolMsgs)
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
	if strings.Join(apis, ",") != "openai,anthropic,openai,anthropic" {
		t.Errorf("answers recorded from %v, want openai,anthropic,openai,anthropic", apis)
	}
}
