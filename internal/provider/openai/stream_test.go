package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// TestStream runs the adapter against the fake over real HTTP, one scripted
// model answer (or failure) per case.
func TestStream(t *testing.T) {
	cases := []struct {
		name  string
		reply fakellm.Reply
		req   llm.Request
		edit  func(*config.ProviderConfig)
		check func(t *testing.T, r result, fake *openaifake.Server)
	}{
		{
			name:  "plain text",
			reply: fakellm.Reply{Text: "Hello there! This answer arrives in several chunks.", Chunk: 5},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				if got := r.msg.Text(); got != "Hello there! This answer arrives in several chunks." {
					t.Errorf("text = %q", got)
				}
				if n := count(r.deltas, llm.DeltaText); n < 5 {
					t.Errorf("want the text in several deltas, got %d", n)
				}
				m := r.msg.Meta
				if m.Provider != "test" || m.API != "openai" || m.Model != "gpt-4o-mini" || m.StopReason != "stop" {
					t.Errorf("meta = %+v", m)
				}
			},
		},
		{
			name:  "thinking then text",
			reply: fakellm.Reply{Thinking: "The user wants a number; 6*7.", Text: "42", Chunk: 6},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				ps := r.msg.Parts
				if len(ps) != 2 || ps[0].Kind != llm.PartThinking || ps[0].Text != "The user wants a number; 6*7." ||
					ps[1].Kind != llm.PartText || ps[1].Text != "42" {
					t.Errorf("parts = %+v", ps)
				}
			},
		},
		{
			name: "two tool calls with interleaved fragments",
			reply: fakellm.Reply{Text: "Let me look.", Chunk: 4, ToolCalls: []fakellm.Call{
				{ID: "call_a", Name: "read_file", Args: `{"path":"notes/today.md"}`},
				{ID: "call_b", Name: "exec", Args: `{"command":"ls -la /tmp"}`},
			}},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				calls := r.msg.ToolCalls()
				if len(calls) != 2 {
					t.Fatalf("calls = %+v", calls)
				}
				if calls[0].ID != "call_a" || calls[0].Name != "read_file" || string(calls[0].Arguments) != `{"path":"notes/today.md"}` {
					t.Errorf("call 0 = %+v", calls[0])
				}
				if calls[1].ID != "call_b" || calls[1].Name != "exec" || string(calls[1].Arguments) != `{"command":"ls -la /tmp"}` {
					t.Errorf("call 1 = %+v", calls[1])
				}
				if r.msg.Meta.StopReason != "tool_calls" {
					t.Errorf("stop = %q", r.msg.Meta.StopReason)
				}
				// The fake interleaves: call_b's first fragment comes before call_a's last.
				var lastA, firstB int
				for i, d := range r.deltas {
					if d.Kind == llm.DeltaToolCallArgs && d.CallID == "call_a" {
						lastA = i
					}
					if d.Kind == llm.DeltaToolCallArgs && d.CallID == "call_b" && firstB == 0 {
						firstB = i
					}
				}
				if firstB == 0 || firstB > lastA {
					t.Errorf("fragments were not interleaved: %v", kinds(r.deltas))
				}
			},
		},
		{
			name:  "arguments that are not JSON keep their raw text",
			reply: fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_x", Name: "exec", Args: `{"command": "ls`}}},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				c := r.msg.ToolCalls()[0]
				if c.ParseError == "" || c.RawArgs != `{"command": "ls` {
					t.Errorf("call = %+v", c)
				}
			},
		},
		{
			name:  "usage with cached and reasoning tokens",
			reply: fakellm.Reply{Thinking: "hmm, let me think this through", Text: "done", InputTokens: 1200, OutputTokens: 90, CachedTokens: 1000},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				want := llm.Usage{InputTokens: 200, OutputTokens: 90, CacheReadTokens: 1000, ReasoningTokens: len("hmm, let me think this through") / 4}
				if got := r.msg.Meta.Usage; got != want {
					t.Errorf("usage = %+v, want %+v", got, want)
				}
				if n := count(r.deltas, llm.DeltaUsage); n != 1 {
					t.Errorf("usage deltas = %d, want 1", n)
				}
			},
		},
		{
			name:  "truncated stream",
			reply: fakellm.Reply{Text: "I was about to say something important", Truncate: true},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				if !errors.Is(r.err, llm.ErrTruncated) {
					t.Errorf("err = %v, want ErrTruncated", r.err)
				}
			},
		},
		{
			name:  "mid-stream error event",
			reply: fakellm.Reply{Text: "partial", MidStreamError: "The server had an error while processing your request."},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Type != "server_error" || !strings.Contains(e.Message, "server had an error") {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name:  "garbage chunk",
			reply: fakellm.Reply{Text: "some text here", Garbage: true},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Type != "invalid_chunk" || !e.Retryable() {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name:  "429 with Retry-After",
			reply: fakellm.Reply{Status: 429, RetryAfter: "7"},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Status != 429 || e.RetryAfter != 7*time.Second || !e.Retryable() || e.Auth() {
					t.Errorf("api error = %+v", e)
				}
				if e.Type != "requests" {
					t.Errorf("type = %q", e.Type)
				}
			},
		},
		{
			name:  "500",
			reply: fakellm.Reply{Status: 500, ErrorMessage: "The server had an error processing your request."},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Status != 500 || e.Type != "server_error" || !e.Retryable() || e.RetryAfter != 0 {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name: "401 wrong key",
			edit: func(c *config.ProviderConfig) { c.APIKey = "sk-wrong-0123456789abcdef" },
			check: func(t *testing.T, r result, fake *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Status != 401 || !e.Auth() || e.Retryable() {
					t.Errorf("api error = %+v", e)
				}
				if strings.Contains(e.Error(), "sk-wrong-0123456789abcdef") {
					t.Errorf("error leaks the key: %v", e)
				}
				if n := len(fake.Script().Requests()); n != 0 {
					t.Errorf("script saw %d requests, want 0", n)
				}
			},
		},
		{
			name:  "400 error body",
			reply: fakellm.Reply{Status: 400, ErrorMessage: "This model's maximum context length is 128000 tokens."},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Status != 400 || e.Type != "invalid_request_error" || e.Retryable() || !strings.Contains(e.Message, "context length") {
					t.Errorf("api error = %+v", e)
				}
			},
		},
		{
			name:  "extra headers arrive",
			reply: fakellm.Reply{Text: "ok"},
			edit: func(c *config.ProviderConfig) {
				c.ExtraHeaders = map[string]string{"HTTP-Referer": "https://nanobot.example", "X-Title": "nanobot"}
			},
			check: func(t *testing.T, r result, fake *openaifake.Server) {
				mustOK(t, r)
				h := fake.Script().Requests()[0].Header
				if h.Get("HTTP-Referer") != "https://nanobot.example" || h.Get("X-Title") != "nanobot" {
					t.Errorf("headers = %v", h)
				}
				if h.Get("Authorization") != "Bearer "+openaifake.DefaultAPIKey {
					t.Errorf("authorization = %q", h.Get("Authorization"))
				}
			},
		},
		{
			name:  "ids synthesised when the server omits them",
			reply: fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "list_dir", Args: `{"path":"."}`}, {Name: "list_dir", Args: `{"path":"memory"}`}}},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				calls := r.msg.ToolCalls()
				if len(calls) != 2 {
					t.Fatalf("calls = %+v", calls)
				}
				for _, c := range calls {
					if !strings.HasPrefix(c.ID, "call_") || len(c.ID) < 10 {
						t.Errorf("id %q not synthesised", c.ID)
					}
				}
				if calls[0].ID == calls[1].ID {
					t.Errorf("ids not unique: %q", calls[0].ID)
				}
				if string(calls[1].Arguments) != `{"path":"memory"}` {
					t.Errorf("args = %s", calls[1].Arguments)
				}
			},
		},
		{
			name:  "duplicate ids from the server are made unique",
			reply: fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_0", Name: "a", Args: `{}`}, {ID: "call_0", Name: "b", Args: `{}`}}},
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				mustOK(t, r)
				calls := r.msg.ToolCalls()
				if len(calls) != 2 || calls[0].ID != "call_0" || calls[1].ID == "call_0" || !strings.HasPrefix(calls[1].ID, "call_") {
					t.Errorf("calls = %+v", calls)
				}
			},
		},
		{
			name:  "timeout bounds the call",
			reply: fakellm.Reply{Delay: time.Hour},
			edit:  func(c *config.ProviderConfig) { c.Timeout = 20 * time.Millisecond },
			check: func(t *testing.T, r result, _ *openaifake.Server) {
				e := mustAPIError(t, r)
				if e.Type != "timeout" || !errors.Is(e, context.DeadlineExceeded) || !e.Retryable() {
					t.Errorf("api error = %+v", e)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(tc.reply)
			fake := openaifake.New(t, script)
			p := newProvider(t, fake, tc.edit)
			req := tc.req
			if req.Model == "" {
				req = userRequest("gpt-4o-mini", "hello")
			}
			tc.check(t, collect(t, p.Stream(context.Background(), req)), fake)
			if rej := fake.Rejected(); len(rej) > 0 && tc.name != "401 wrong key" {
				t.Errorf("fake rejected the request: %+v", rej)
			}
		})
	}
}

func mustOK(t *testing.T, r result) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("stream failed: %v (deltas %v)", r.err, kinds(r.deltas))
	}
}

func mustAPIError(t *testing.T, r result) *llm.APIError {
	t.Helper()
	var e *llm.APIError
	if !errors.As(r.err, &e) {
		t.Fatalf("err = %v (%T), want *llm.APIError", r.err, r.err)
	}
	if e.Provider != "test" {
		t.Errorf("provider = %q", e.Provider)
	}
	return e
}

// TestModelQuirks checks the request fields per model family: reasoning
// models get max_completion_tokens, reasoning_effort and no temperature.
func TestModelQuirks(t *testing.T) {
	temp := 0.7
	zero := 0.0
	cases := []struct {
		model   string
		temp    *float64
		present []string
		absent  []string
	}{
		{"o3-mini", &temp, []string{"max_completion_tokens", "reasoning_effort"}, []string{"max_tokens", "temperature"}},
		{"o1", &temp, []string{"max_completion_tokens"}, []string{"max_tokens", "temperature"}},
		{"o4-mini", &temp, []string{"max_completion_tokens"}, []string{"max_tokens", "temperature"}},
		{"gpt-5-mini", &temp, []string{"max_completion_tokens"}, []string{"max_tokens", "temperature"}},
		{"openai/gpt-5", &temp, []string{"max_completion_tokens"}, []string{"max_tokens", "temperature"}},
		{"gpt-4o-mini", &temp, []string{"max_tokens", "temperature"}, []string{"max_completion_tokens", "reasoning_effort"}},
		{"gpt-4o-mini", &zero, []string{"temperature"}, nil},
		{"deepseek-reasoner", nil, []string{"max_tokens"}, []string{"temperature", "reasoning_effort"}},
		{"llama3.1:8b", nil, []string{"max_tokens", "stream_options"}, []string{"max_completion_tokens"}},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			fake := openaifake.New(t, nil)
			p := newProvider(t, fake, nil)
			req := userRequest(tc.model, "hi")
			req.MaxTokens, req.Temperature, req.ReasoningEffort = 1000, tc.temp, "high"
			mustOK(t, collect(t, p.Stream(context.Background(), req)))
			reqs := fake.Script().Requests()
			if len(reqs) != 1 {
				t.Fatalf("requests = %d, rejected = %+v", len(reqs), fake.Rejected())
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(reqs[0].Raw, &body); err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.present {
				if _, ok := body[k]; !ok {
					t.Errorf("%s missing from %s", k, reqs[0].Raw)
				}
			}
			for _, k := range tc.absent {
				if _, ok := body[k]; ok {
					t.Errorf("%s sent in %s", k, reqs[0].Raw)
				}
			}
			if reqs[0].MaxTokens != 1000 {
				t.Errorf("max tokens = %d", reqs[0].MaxTokens)
			}
			if tc.temp == &zero {
				var got float64
				_ = json.Unmarshal(body["temperature"], &got)
				if got < 0 || got > 1e-30 {
					t.Errorf("zero temperature sent as %v", got)
				}
			}
		})
	}
}

// TestFakeRejectsMaxTokensForReasoningModels shows why the quirk matters: the
// strict fake answers 400 like OpenAI, and the adapter reports it.
func TestFakeRejectsMaxTokensForReasoningModels(t *testing.T) {
	fake := openaifake.New(t, nil)
	resp := postJSON(t, fake, `{"model":"o3-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if rej := fake.Rejected(); len(rej) != 1 || !strings.Contains(rej[0].Message, "max_completion_tokens") {
		t.Errorf("rejected = %+v", rej)
	}
}

// postJSON posts body to the fake and returns its answer, body closed.
//
//bodyclose:handled
func postJSON(t *testing.T, fake *openaifake.Server, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fake.URL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestToolsAndForcedChoice checks tool specs and tool_choice on the wire.
func TestToolsAndForcedChoice(t *testing.T) {
	fake := openaifake.New(t, nil)
	p := newProvider(t, fake, nil)
	req := userRequest("gpt-4o-mini", "remember this")
	req.Tools = []llm.ToolSpec{
		{Name: "save_memory", Description: "Save a fact.", Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`)},
		{Name: "noop", Description: "No parameters."},
	}
	req.ForceTool = "save_memory"
	mustOK(t, collect(t, p.Stream(context.Background(), req)))
	got := fake.Script().Requests()[0]
	if !slices.Equal(got.Tools, []string{"save_memory", "noop"}) || got.ToolChoice != "save_memory" {
		t.Errorf("tools = %v, choice = %q", got.Tools, got.ToolChoice)
	}
	if !strings.Contains(string(got.Raw), `"parameters":{"properties":{},"type":"object"}`) &&
		!strings.Contains(string(got.Raw), `"parameters":{"type":"object","properties":{}}`) {
		t.Errorf("tool without schema did not get an empty object schema: %s", got.Raw)
	}
}

// TestCancelMidStream cancels the context after the first text delta while
// the server is still streaming: the stream ends with ctx.Err(), the server
// sees the request go away, and no goroutine is left.
func TestCancelMidStream(t *testing.T) {
	ignore := goleakIgnoreCurrent()
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: strings.Repeat("word ", 50), Chunk: 5, ChunkDelay: time.Hour})
	fake := openaifake.New(t, script)
	client := testClient(t)
	p := newProviderWithClient(t, fake, client)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acc llm.Accumulator
	var last llm.Delta
	for d := range p.Stream(ctx, userRequest("gpt-4o-mini", "talk")) {
		if err := acc.Add(d); err != nil {
			t.Fatalf("contract: %v", err)
		}
		if d.Kind == llm.DeltaText {
			if fake.InFlight() != 1 {
				t.Errorf("in flight = %d during the stream", fake.InFlight())
			}
			cancel()
		}
		last = d
	}
	if last.Kind != llm.DeltaError || !errors.Is(last.Err, context.Canceled) {
		t.Fatalf("last delta = %+v, want error context.Canceled", last)
	}
	if _, err := acc.Message(); !errors.Is(err, context.Canceled) {
		t.Errorf("accumulator err = %v", err)
	}
	waitFor(t, "the server to see the request cancelled", func() bool { return fake.InFlight() == 0 })
	fake.Close()
	client.CloseIdleConnections()
	verifyNoLeaks(t, ignore)
}

// TestConsumerStopsEarly breaks out of the range loop: the adapter must not
// yield again and must close the stream, which the server observes.
func TestConsumerStopsEarly(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: strings.Repeat("token ", 50), Chunk: 6, ChunkDelay: time.Hour})
	fake := openaifake.New(t, script)
	p := newProvider(t, fake, nil)
	var got []llm.DeltaKind
	for d := range p.Stream(context.Background(), userRequest("gpt-4o-mini", "talk")) {
		got = append(got, d.Kind)
		if d.Kind == llm.DeltaText {
			break // a second yield would make the runtime panic
		}
	}
	if !slices.Equal(got, []llm.DeltaKind{llm.DeltaStart, llm.DeltaText}) {
		t.Errorf("deltas = %v", got)
	}
	waitFor(t, "the server to see the stream closed", func() bool { return fake.InFlight() == 0 })
}

// TestStopAtStart stops before the request is sent: nothing reaches the server.
func TestStopAtStart(t *testing.T) {
	fake := openaifake.New(t, nil)
	p := newProvider(t, fake, nil)
	for d := range p.Stream(context.Background(), userRequest("gpt-4o-mini", "x")) {
		if d.Kind != llm.DeltaStart {
			t.Fatalf("first delta = %s", d.Kind)
		}
		break
	}
	if n := len(fake.Script().Requests()); n != 0 {
		t.Errorf("requests = %d", n)
	}
}

// TestCancelledBeforeCall: an already cancelled context gives start then the
// context's error, without a request.
func TestCancelledBeforeCall(t *testing.T) {
	fake := openaifake.New(t, nil)
	p := newProvider(t, fake, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := collect(t, p.Stream(ctx, userRequest("gpt-4o-mini", "x")))
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("err = %v", r.err)
	}
	if n := len(fake.Script().Requests()); n != 0 {
		t.Errorf("requests = %d", n)
	}
}

// TestConnectionRefused: a transport failure is a retryable APIError with no status.
func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := newRawProvider(t, url+"/v1")
	r := collect(t, p.Stream(context.Background(), userRequest("gpt-4o-mini", "x")))
	e := mustAPIError(t, r)
	if e.Status != 0 || e.Type != "transport" || !e.Retryable() {
		t.Errorf("api error = %+v", e)
	}
}

// TestConcurrentStreams: one Provider serves many calls at once (run with
// -race); each gets its own answer.
func TestConcurrentStreams(t *testing.T) {
	script := &fakellm.Script{Func: func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "echo: " + r.LastUserText(), Chunk: 3}
	}}
	fake := openaifake.New(t, script)
	p := newProvider(t, fake, nil)
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var acc llm.Accumulator
			for d := range p.Stream(context.Background(), userRequest("gpt-4o-mini", fmt.Sprintf("message %d", i))) {
				if err := acc.Add(d); err != nil {
					errs[i] = err
				}
			}
			msg, err := acc.Message()
			got[i], errs[i] = msg.Text(), errors.Join(errs[i], err)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != fmt.Sprintf("echo: message %d", i) {
			t.Errorf("stream %d: %q, %v", i, got[i], errs[i])
		}
	}
}
