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
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// The delta contract holds whatever a server sends (docs/architecture.md):
// on each of the four protocols, a model that gives two calls of one turn
// the same id still gets each call run once, and each result back under an
// id of its own, in every request and in the session.
func TestRepeatedCallIDsStayUniqueOnEveryProtocol(t *testing.T) {
	for _, pr := range alternatingProtocols {
		t.Run(pr.api, func(t *testing.T) {
			script := &fakellm.Script{}
			entry, rejected := pr.start(t, script)
			home := t.TempDir()
			ws := filepath.Join(home, "workspace")
			yaml := fmt.Sprintf("agents: {workspace: %q, model: %s}\nproviders:\n  %s\ngateway: {heartbeat: {enabled: false}}\n", ws, pr.model, entry)
			path := filepath.Join(home, "config.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			core, err := Build(cfg, Options{Version: "test", DataDir: home}, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			for name, text := range map[string]string{"a.md": "alpha", "b.md": "beta"} {
				if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
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

			script.Push(
				fakellm.Reply{ToolCalls: []fakellm.Call{
					{ID: "call_0", Name: "read_file", Args: `{"path":"a.md"}`},
					{ID: "call_0", Name: "read_file", Args: `{"path":"b.md"}`},
				}},
				fakellm.Reply{Text: "alpha and beta"})
			if err := core.Bus.PublishInbound(ctx, bus.InboundMessage{Channel: "cli", ChatID: "local", SenderID: "me", Content: "read both"}); err != nil {
				t.Fatal(err)
			}
			final := awaitFinal(t, core.Bus)
			if final.Content != "alpha and beta" || final.IsError {
				t.Fatalf("final = %q (error %v)", final.Content, final.IsError)
			}
			for _, r := range rejected() {
				t.Errorf("the %s fake refused a request: %s", pr.api, r)
			}
			// The second request carries each call's result once, under
			// the call's own id, with its own content.
			reqs := script.Requests()
			// Gemini pairs calls and responses by position, and the ids
			// its adapter made are never sent back to it.
			var calls []fakellm.Call
			var inOrder []fakellm.Result
			results := map[string]string{}
			for _, m := range reqs[1].Messages {
				calls = append(calls, m.ToolCalls...)
				inOrder = append(inOrder, m.ToolResults...)
				for _, r := range m.ToolResults {
					if _, dup := results[r.CallID]; dup && pr.callIDs {
						t.Errorf("two results for call id %q", r.CallID)
					}
					results[r.CallID] = r.Content
				}
			}
			if len(calls) != 2 || len(inOrder) != 2 || (pr.callIDs && calls[0].ID == calls[1].ID) {
				t.Fatalf("replayed calls %+v, results %+v: want two calls with distinct ids and a result each", calls, inOrder)
			}
			for i, want := range []string{"alpha", "beta"} {
				got := inOrder[i].Content
				if pr.callIDs {
					got = results[calls[i].ID]
				}
				if !strings.Contains(got, want) {
					t.Errorf("result of call %d (%s) = %q, want %q", i, calls[i].ID, got, want)
				}
			}
			snap, err := core.Sessions.Get("cli:local")
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]int{}
			for _, m := range snap.Messages {
				if err := m.Validate(); err != nil {
					t.Errorf("saved an invalid message: %v", err)
				}
				for _, c := range m.ToolCalls() {
					ids[c.ID]++
				}
				for _, r := range m.ToolResults() {
					ids[r.ToolCallID] += 10
				}
			}
			if len(ids) != 2 {
				t.Errorf("session call ids %v: want two", ids)
			}
			for id, n := range ids {
				if n != 11 {
					t.Errorf("call %s: %d calls and %d results saved, want one of each", id, n%10, n/10)
				}
			}
		})
	}
}

// awaitFinal returns the next final message on b, confirming each message
// as a channel would.
func awaitFinal(t *testing.T, b *bus.Bus) bus.OutboundMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-b.Outbound():
			if m.Delivered != nil {
				m.Delivered()
			}
			if m.Kind == bus.KindFinal {
				return m
			}
		case <-deadline:
			t.Fatal("no final message")
			return bus.OutboundMessage{}
		}
	}
}
