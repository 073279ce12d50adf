package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// rawServer answers every request with status, headers and body verbatim:
// the shapes compatible servers send that the OpenAI fake does not.
func rawServer(t *testing.T, status int, header map[string]string, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// sse joins data lines into an event stream.
func sse(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\n\n")
	}
	return b.String()
}

func TestCompatibleServers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header map[string]string
		body   string
		check  func(t *testing.T, r result)
	}{
		{
			name: "stream ends cleanly without finish_reason or [DONE]",
			body: sse(`data: {"choices":[{"index":0,"delta":{"content":"half an ans"}}]}`),
			check: func(t *testing.T, r result) {
				if !errors.Is(r.err, llm.ErrTruncated) {
					t.Errorf("err = %v", r.err)
				}
			},
		},
		{
			name: "[DONE] without finish_reason",
			body: sse(`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`, `data: [DONE]`),
			check: func(t *testing.T, r result) {
				if !errors.Is(r.err, llm.ErrTruncated) {
					t.Errorf("err = %v", r.err)
				}
			},
		},
		{
			name: "OpenRouter reasoning field, keep-alive comments and chunk-level usage",
			body: ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n" + sse(
				`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Think"}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"","reasoning":"ing."}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"Answer","reasoning":null}}]}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				ps := r.msg.Parts
				if len(ps) != 2 || ps[0].Kind != llm.PartThinking || ps[0].Text != "Thinking." || ps[1].Text != "Answer" {
					t.Errorf("parts = %+v", ps)
				}
				if u := r.msg.Meta.Usage; u.InputTokens != 10 || u.OutputTokens != 5 {
					t.Errorf("usage = %+v", u)
				}
			},
		},
		{
			name: "DeepSeek reasoning_content and prompt cache hits",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Hmm."}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"Yes.","reasoning_content":null}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36,"completion_tokens_details":{"reasoning_tokens":3}}}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				want := llm.Usage{InputTokens: 36, OutputTokens: 7, CacheReadTokens: 64, ReasoningTokens: 3}
				if u := r.msg.Meta.Usage; u != want {
					t.Errorf("usage = %+v, want %+v", u, want)
				}
			},
		},
		{
			name: "running usage on every chunk is not double counted; Groq x_groq usage",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"content":"a"}}],"x_groq":{"usage":{"prompt_tokens":10,"completion_tokens":1}}}`,
				`data: {"choices":[{"index":0,"delta":{"content":"b"}}],"x_groq":{"usage":{"prompt_tokens":10,"completion_tokens":2}}}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"usage":{"prompt_tokens":10,"completion_tokens":3}}}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				if u := r.msg.Meta.Usage; u.InputTokens != 10 || u.OutputTokens != 3 {
					t.Errorf("usage = %+v", u)
				}
			},
		},
		{
			name: "whole tool calls without index, name repeated, no ids",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"name":"read_file","arguments":"\"a.md\"}"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				calls := r.msg.ToolCalls()
				if len(calls) != 1 || calls[0].Name != "read_file" || string(calls[0].Arguments) != `{"path":"a.md"}` || !strings.HasPrefix(calls[0].ID, "call_") {
					t.Errorf("calls = %+v", calls)
				}
			},
		},
		{
			name: "calls without index told apart by id",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				calls := r.msg.ToolCalls()
				if len(calls) != 2 || calls[0].ID != "c1" || calls[1].ID != "c2" || string(calls[1].Arguments) != `{"x":1}` {
					t.Errorf("calls = %+v", calls)
				}
			},
		},
		{
			name: "arguments before the name are kept",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":"{\"q\":"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"search","arguments":"\"go\"}"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				c := r.msg.ToolCalls()
				if len(c) != 1 || c[0].ID != "c1" || c[0].Name != "search" || string(c[0].Arguments) != `{"q":"go"}` {
					t.Errorf("calls = %+v", c)
				}
			},
		},
		{
			name: "call that never gets a name still ends cleanly",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":"{}"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`data: [DONE]`),
			check: func(t *testing.T, r result) {
				mustOK(t, r)
				c := r.msg.ToolCalls()
				if len(c) != 1 || c[0].Name != "missing_tool_name" || c[0].ID != "c1" {
					t.Errorf("calls = %+v", c)
				}
			},
		},
		{
			name: "OpenRouter error inside an ordinary chunk",
			body: sse(
				`data: {"choices":[{"index":0,"delta":{"content":"part"}}]}`,
				`data: {"id":"x","object":"chat.completion.chunk","error":{"code":502,"message":"Upstream provider error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`),
			check: func(t *testing.T, r result) {
				e := mustAPIError(t, r)
				if e.Status != 502 || e.Message != "Upstream provider error" || !e.Retryable() {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name: "bare string error chunk",
			body: sse(`data: {"choices":[],"error":"model is overloaded"}`),
			check: func(t *testing.T, r result) {
				e := mustAPIError(t, r)
				if e.Message != "model is overloaded" {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name: "error event whose error is a bare string",
			body: sse(`data: {"choices":[{"index":0,"delta":{"content":"x"}}]}`, `data: {"error":"model not found"}`),
			check: func(t *testing.T, r result) {
				e := mustAPIError(t, r)
				if e.Type != "stream_error" {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name:   "non-JSON error page from a proxy with retry-after-ms",
			status: 503,
			header: map[string]string{"Content-Type": "text/html", "retry-after-ms": "1500", "Retry-After": "2"},
			body:   "<html><body>503 Service Temporarily Unavailable</body></html>",
			check: func(t *testing.T, r result) {
				e := mustAPIError(t, r)
				if e.Status != 503 || e.RetryAfter != 1500*time.Millisecond || !strings.Contains(e.Message, "Temporarily Unavailable") {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name:   "Retry-After as an HTTP date in the past means no wait",
			status: 429,
			header: map[string]string{"Content-Type": "application/json", "Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
			body:   `{"error":{"message":"slow down","type":"rate_limit_error","code":null}}`,
			check: func(t *testing.T, r result) {
				e := mustAPIError(t, r)
				if e.Status != 429 || e.RetryAfter != 0 || e.Type != "rate_limit_error" {
					t.Errorf("api error = %+v", e)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == 0 {
				status = http.StatusOK
			}
			p := newRawProvider(t, rawServer(t, status, tc.header, tc.body))
			tc.check(t, collect(t, p.Stream(context.Background(), userRequest("some-model", "hi"))))
		})
	}
}
