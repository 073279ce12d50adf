package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

var _ provider.Streamer = (*openai.Responses)(nil)

func newResponses(t *testing.T, fake *openaifake.Server, edit func(*config.ProviderConfig)) *openai.Responses {
	t.Helper()
	cfg := config.ProviderConfig{Kind: openai.ResponsesAPI, APIKey: fake.APIKey(), BaseURL: fake.URL()}
	if edit != nil {
		edit(&cfg)
	}
	return openai.NewResponses("test", cfg, testClient(t), zaptest.NewLogger(t))
}

// TestResponsesToolTurn runs a reasoning, tool-using turn and its follow-up
// through the strict fake: the follow-up must carry the function call, its
// output and the encrypted reasoning exactly as received.
func TestResponsesToolTurn(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(
		fakellm.Reply{Thinking: "Look up the weather first.", Text: "Checking.", Chunk: 4,
			ToolCalls:   []fakellm.Call{{ID: "call_w1", Name: "weather", Args: `{"city":"Oslo"}`}},
			InputTokens: 100, OutputTokens: 40, CachedTokens: 64},
		fakellm.Reply{Text: "It is 3°C in Oslo."},
	)
	fake := openaifake.New(t, script)
	p := newResponses(t, fake, nil)
	req := userRequest("o4-mini", "weather in Oslo?")
	req.Tools = []llm.ToolSpec{{Name: "weather", Description: "Weather now", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}

	r := collect(t, p.Stream(context.Background(), req))
	mustOK(t, r)
	m := r.msg
	if m.Meta.API != openai.ResponsesAPI || m.Meta.StopReason != "tool_calls" {
		t.Errorf("meta = %+v", m.Meta)
	}
	// input_tokens (100) includes the 64 cached ones; llm.Usage keeps them
	// apart, as for Chat Completions (it used to count them twice).
	if u := m.Meta.Usage; u.InputTokens != 36 || u.OutputTokens != 40 || u.CacheReadTokens != 64 || u.ReasoningTokens == 0 {
		t.Errorf("usage = %+v", u)
	}
	if len(m.Parts) != 3 || m.Parts[0].Kind != llm.PartThinking || m.Parts[0].Signature == "" ||
		m.Parts[1].Text != "Checking." || m.Parts[2].Call == nil || string(m.Parts[2].Call.Arguments) != `{"city":"Oslo"}` {
		t.Fatalf("parts = %+v", m.Parts)
	}
	if m.Text() != "Checking." {
		t.Errorf("thinking leaked into the text: %q", m.Text())
	}

	result := llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_w1", Name: "weather", Content: llm.Content{Live: "3°C"}}}}}
	req.Messages = append(req.Messages, m, result)
	r = collect(t, p.Stream(context.Background(), req))
	mustOK(t, r)
	if rej := fake.Rejected(); len(rej) > 0 {
		t.Fatalf("fake rejected: %+v", rej)
	}
	reqs := script.Requests()
	var raw struct {
		Store   *bool    `json:"store"`
		Include []string `json:"include"`
	}
	if err := json.Unmarshal(reqs[1].Raw, &raw); err != nil || raw.Store == nil || *raw.Store || len(raw.Include) != 1 || raw.Include[0] != "reasoning.encrypted_content" {
		t.Errorf("store/include = %s", reqs[1].Raw)
	}
	got := reqs[1].Messages
	if len(got) != 5 || got[1].Thinking != "Look up the weather first." || got[3].ToolCalls[0].ID != "call_w1" || got[4].ToolResults[0].Content != "3°C" {
		t.Errorf("replayed = %+v", got)
	}
}

// TestResponsesHistory checks what is not replayed: another vendor's thinking,
// an orphan tool result; and that store: true is sent when configured.
func TestResponsesHistory(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: "ok"})
	fake := openaifake.New(t, script)
	p := newResponses(t, fake, func(c *config.ProviderConfig) { c.Store = true })
	req := userRequest("gpt-5", "hi")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Meta: &llm.Meta{API: "anthropic"}, Parts: []llm.Part{
			{Kind: llm.PartThinking, Text: "claude thoughts", Signature: "sig-anthropic"}, llm.Text("hello")}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "gone", Content: llm.Content{Live: "x"}}}}},
		llm.NewText(llm.RoleUser, "again"),
	)
	mustOK(t, collect(t, p.Stream(context.Background(), req)))
	if rej := fake.Rejected(); len(rej) > 0 {
		t.Fatalf("fake rejected: %+v", rej)
	}
	sent := script.Requests()[0]
	if len(sent.Messages) != 3 || sent.Messages[1].Thinking != "" || sent.Messages[1].Text != "hello" {
		t.Errorf("messages = %+v", sent.Messages)
	}
	var raw struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal(sent.Raw, &raw); err != nil {
		t.Fatalf("request body: %v: %s", err, sent.Raw)
	}
	if raw.Store == nil || !*raw.Store {
		t.Errorf("store not sent as true: %s", sent.Raw)
	}
}

// TestResponsesFaults: the failures the router acts on arrive classified.
func TestResponsesFaults(t *testing.T) {
	cases := []struct {
		name  string
		reply fakellm.Reply
		check func(t *testing.T, err error)
	}{
		{"429 with retry-after", fakellm.Reply{Status: 429, RetryAfter: "7"}, func(t *testing.T, err error) {
			var e *llm.APIError
			if !errors.As(err, &e) || e.Status != 429 || e.RetryAfter != 7*time.Second || !e.Retryable() {
				t.Errorf("err = %#v", err)
			}
		}},
		{"503 with retry-after-ms", fakellm.Reply{Status: 503, RetryAfterMS: "1500"}, func(t *testing.T, err error) {
			var e *llm.APIError
			if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 1500*time.Millisecond || !e.Retryable() {
				t.Errorf("err = %#v", err)
			}
		}},
		{"401", fakellm.Reply{Status: 401}, func(t *testing.T, err error) {
			var e *llm.APIError
			if !errors.As(err, &e) || !e.Auth() || e.Retryable() {
				t.Errorf("err = %#v", err)
			}
		}},
		{"cut mid-stream", fakellm.Reply{Text: "partial answer", Chunk: 3, Truncate: true}, func(t *testing.T, err error) {
			if !errors.Is(err, llm.ErrTruncated) {
				t.Errorf("err = %v, want ErrTruncated", err)
			}
		}},
		{"response.failed", fakellm.Reply{Text: "partial", MidStreamError: "The server had an error"}, func(t *testing.T, err error) {
			var e *llm.APIError
			if !errors.As(err, &e) || e.Type != "server_error" || !e.Retryable() {
				t.Errorf("err = %#v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(tc.reply)
			p := newResponses(t, openaifake.New(t, script), nil)
			r := collect(t, p.Stream(context.Background(), userRequest("gpt-5", "hi")))
			if r.err == nil {
				t.Fatal("stream succeeded")
			}
			tc.check(t, r.err)
		})
	}
}
