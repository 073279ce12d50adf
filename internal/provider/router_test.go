package provider

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func newTestRouter(t *testing.T, script *fakellm.Script) *Router {
	t.Helper()
	return NewRouter(
		map[string]Streamer{"openai": &fakellm.Streamer{Name: "openai", Script: script}},
		Options{
			Default: "openai/gpt-4o-mini",
			Routes:  map[string]RouteSpec{"smart": {Model: "openai/gpt-4.1", ContextWindow: 50_000, MaxTokens: 1000}},
		},
		zaptest.NewLogger(t))
}

func TestResolve(t *testing.T) {
	r := newTestRouter(t, &fakellm.Script{})
	tests := []struct {
		in      string
		want    Route
		wantErr bool
	}{
		{"", Route{Name: "openai/gpt-4o-mini", Provider: "openai", Model: "gpt-4o-mini", ContextWindow: 128_000}, false},
		{"smart", Route{Name: "smart", Provider: "openai", Model: "gpt-4.1", ContextWindow: 50_000, MaxTokens: 1000}, false},
		{"openai/meta-llama/llama-3-70b", Route{Name: "openai/meta-llama/llama-3-70b", Provider: "openai", Model: "meta-llama/llama-3-70b", ContextWindow: 128_000}, false},
		{"anthropic/claude", Route{}, true},
		{"nonsense", Route{}, true},
		{"openai/", Route{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := r.Resolve(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrUnknownRoute) {
					t.Fatalf("err = %v, want ErrUnknownRoute", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Provider != tt.want.Provider || got.Model != tt.want.Model ||
				got.ContextWindow != tt.want.ContextWindow || got.MaxTokens != tt.want.MaxTokens {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := r.Routes(); len(got) != 2 || got[0] != "openai/gpt-4o-mini" || got[1] != "smart" {
		t.Errorf("Routes() = %v", got)
	}
}

func TestCompleteRecordsRoute(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: "hello there"})
	r := newTestRouter(t, script)
	var seen int
	msg, err := r.Complete(context.Background(), "smart", llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}, func(llm.Delta) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "hello there" || msg.Meta.Route != "smart" || msg.Meta.Provider != "openai" || msg.Meta.Model != "gpt-4.1" {
		t.Errorf("msg = %q meta %+v", msg.Text(), msg.Meta)
	}
	if seen == 0 {
		t.Error("onDelta never called")
	}
	if reqs := script.Requests(); reqs[0].Model != "gpt-4.1" || reqs[0].MaxTokens != 1000 {
		t.Errorf("request model %q max_tokens %d", reqs[0].Model, reqs[0].MaxTokens)
	}
}

func TestCompleteErrorYieldsNoMessage(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: "partial", Truncate: true})
	r := newTestRouter(t, script)
	msg, err := r.Complete(context.Background(), "", llm.Request{}, nil)
	if !errors.Is(err, llm.ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if len(msg.Parts) != 0 {
		t.Errorf("failed call returned a message: %+v", msg)
	}
}

func TestContextWindowTable(t *testing.T) {
	tests := map[string]int{
		"gpt-4o-mini": 128_000, "gpt-4.1-mini": 1_047_576, "gpt-4": 8_192, "claude-sonnet-4-5": 200_000,
		"anthropic/claude-3-haiku": 200_000, "o1-mini": 128_000, "o3": 200_000, "something-new": defaultContextWindow,
	}
	for model, want := range tests {
		if got := ContextWindow(model); got != want {
			t.Errorf("ContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}
