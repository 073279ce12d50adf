package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestThinkingReplay: thinking produced by Anthropic goes back verbatim with
// its signature on the next call of the tool loop and the strict fake (which
// checks signatures it issued) accepts it; altered thinking is refused by the
// fake, and thinking from another provider is dropped with thinking turned
// off for that call instead of failing it.
func TestThinkingReplay(t *testing.T) {
	f := newFixture(t)
	f.script.Push(
		fakellm.Reply{Thinking: "I should read the file first.", ToolCalls: []fakellm.Call{{ID: "toolu_r1", Name: "read_file", Args: `{"path":"a.md"}`}}},
		fakellm.Reply{Thinking: "Now I can answer.", Text: "It says hello."},
	)
	req := llm.Request{Model: testModel, Tools: testTools, ThinkingBudget: 2048, Messages: []llm.Message{userText("what is in a.md?")}}
	first := run(t, f.p, context.Background(), req)
	if first.err != nil {
		t.Fatalf("first call: %v", first.err)
	}
	req.Messages = append(req.Messages, first.msg, tool(result("toolu_r1", "read_file", "hello")))
	second := run(t, f.p, context.Background(), req)
	if second.err != nil {
		t.Fatalf("second call: %v", second.err)
	}
	noRejections(t, f.srv)
	sent := f.script.Requests()[1]
	if sent.ThinkingBudget != 2048 {
		t.Errorf("thinking budget on replay = %d, want 2048", sent.ThinkingBudget)
	}
	if got := sent.Messages[1].Thinking; got != "I should read the file first." {
		t.Errorf("replayed thinking = %q", got)
	}
	if sig := first.msg.Parts[0].Signature; sig == "" || !strings.Contains(string(sent.Raw), `"signature":"`+sig+`"`) {
		t.Errorf("signature %q not replayed verbatim", sig)
	}

	t.Run("altered thinking is refused by the fake", func(t *testing.T) {
		tampered := cloneMessages(req.Messages)
		tampered[1].Parts[0].Text = "I should delete the file."
		res := run(t, f.p, context.Background(), llm.Request{Model: testModel, Tools: testTools, ThinkingBudget: 2048, Messages: tampered})
		var apiErr *llm.APIError
		if !errors.As(res.err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "signature") {
			t.Fatalf("err = %v, want a 400 about the signature", res.err)
		}
	})

	t.Run("thinking from another provider is dropped", func(t *testing.T) {
		foreign := cloneMessages(req.Messages)
		foreign[1].Meta = &llm.Meta{Provider: "openai", API: "openai", Model: "o3"}
		before := len(f.srv.Rejected())
		f.script.Push(fakellm.Reply{Text: "ok"})
		res := run(t, f.p, context.Background(), llm.Request{Model: testModel, Tools: testTools, ThinkingBudget: 2048, Messages: foreign})
		if res.err != nil {
			t.Fatalf("call failed: %v", res.err)
		}
		if n := len(f.srv.Rejected()); n != before {
			t.Fatalf("fake refused the request: %+v", f.srv.Rejected()[before:])
		}
		reqs := f.script.Requests()
		sent := reqs[len(reqs)-1]
		if sent.Messages[1].Thinking != "" || sent.ThinkingBudget != 0 {
			t.Errorf("thinking %q budget %d: want no replayed thinking and thinking off", sent.Messages[1].Thinking, sent.ThinkingBudget)
		}
	})
}

func cloneMessages(ms []llm.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		m.Parts = append([]llm.Part(nil), m.Parts...)
		out[i] = m
	}
	return out
}

// TestEnvironmentIgnored: the official SDK's defaults read ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_CUSTOM_HEADERS and
// profile files, and users may expect them to count; the adapter must use
// the config and nothing else.
func TestEnvironmentIgnored(t *testing.T) {
	var decoyHits atomic.Int32
	decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decoyHits.Add(1)
		http.Error(w, "wrong server", http.StatusTeapot)
	}))
	t.Cleanup(decoy.Close)
	t.Setenv("ANTHROPIC_API_KEY", anthropicfake.APIKey) // the right key: using it would make the keyless call succeed
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	t.Setenv("ANTHROPIC_BASE_URL", decoy.URL)
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Env: yes")
	t.Setenv("ANTHROPIC_PROFILE", "from-env")
	t.Setenv("ANTHROPIC_CONFIG_DIR", t.TempDir())

	t.Run("config key and headers used", func(t *testing.T) {
		f := newFixture(t, func(c *config.ProviderConfig) { c.ExtraHeaders = map[string]string{"X-Title": "nanobot"} })
		res := run(t, f.p, context.Background(), ask("hi"))
		if res.err != nil {
			t.Fatalf("call failed: %v", res.err)
		}
		h := f.script.Requests()[0].Header
		if h.Get("X-Api-Key") != anthropicfake.APIKey || h.Get("Authorization") != "" || h.Get("X-From-Env") != "" {
			t.Errorf("headers from the environment leaked: x-api-key %q authorization %q x-from-env %q",
				h.Get("X-Api-Key"), h.Get("Authorization"), h.Get("X-From-Env"))
		}
		if h.Get("X-Title") != "nanobot" {
			t.Errorf("extra header missing: %v", h)
		}
	})
	t.Run("no config key means no key", func(t *testing.T) {
		f := newFixture(t, func(c *config.ProviderConfig) { c.APIKey = "" })
		res := run(t, f.p, context.Background(), ask("hi"))
		var apiErr *llm.APIError
		if !errors.As(res.err, &apiErr) || !apiErr.Auth() {
			t.Fatalf("err = %v, want an auth error (the environment's key must not be used)", res.err)
		}
	})
	if n := decoyHits.Load(); n != 0 {
		t.Errorf("ANTHROPIC_BASE_URL was used: %d requests reached it", n)
	}
}

func TestBaseURLWithV1(t *testing.T) {
	f := newFixture(t, func(c *config.ProviderConfig) { c.BaseURL += "/v1/" })
	if res := run(t, f.p, context.Background(), ask("hi")); res.err != nil {
		t.Fatalf("base_url ending in /v1 failed: %v", res.err)
	}
}

// TestCancellation: stopping the iteration, cancelling the context and the
// configured timeout all end the call, leave no goroutine behind, and never
// look like a provider failure to retry except the timeout.
func TestCancellation(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // registered first, so it runs after the fakes closed

	t.Run("consumer stops early", func(t *testing.T) {
		f := newFixture(t)
		f.script.Push(fakellm.Reply{Text: strings.Repeat("word ", 100), ChunkDelay: time.Hour})
		var kinds []llm.DeltaKind
		for d := range f.p.Stream(context.Background(), ask("hi")) {
			kinds = append(kinds, d.Kind)
			if d.Kind == llm.DeltaText {
				break
			}
		}
		if !reflect.DeepEqual(kinds, []llm.DeltaKind{llm.DeltaStart, llm.DeltaText}) {
			t.Errorf("deltas = %v", kinds)
		}
	})
	t.Run("context cancelled mid-stream", func(t *testing.T) {
		f := newFixture(t)
		f.script.Push(fakellm.Reply{Text: strings.Repeat("word ", 100), ChunkDelay: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var last llm.Delta
		for d := range f.p.Stream(ctx, ask("hi")) {
			if d.Kind == llm.DeltaText {
				cancel()
			}
			last = d
		}
		var apiErr *llm.APIError
		if last.Kind != llm.DeltaError || !errors.Is(last.Err, context.Canceled) || errors.As(last.Err, &apiErr) {
			t.Fatalf("last delta = %+v, want an error terminal wrapping context.Canceled, not an APIError", last)
		}
	})
	t.Run("context cancelled before the answer", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The fake decides its reply once the request reached it: cancel
		// then, and answer too late.
		f.script.Func = func(fakellm.Request) fakellm.Reply {
			cancel()
			return fakellm.Reply{Text: "late", Delay: time.Hour}
		}
		res := run(t, f.p, ctx, ask("hi"))
		if !errors.Is(res.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", res.err)
		}
	})
	t.Run("configured timeout", func(t *testing.T) {
		f := newFixture(t, func(c *config.ProviderConfig) { c.Timeout = 50 * time.Millisecond })
		f.script.Push(fakellm.Reply{Text: "late", Delay: time.Hour})
		res := run(t, f.p, context.Background(), ask("hi"))
		var apiErr *llm.APIError
		if !errors.As(res.err, &apiErr) || apiErr.Type != "timeout" || !apiErr.Retryable() || !errors.Is(res.err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want a retryable timeout APIError", res.err)
		}
	})
}

func TestModels(t *testing.T) {
	f := newFixture(t)
	ids, err := f.p.Models(context.Background())
	if err != nil {
		t.Fatalf("Models: %v", err)
	}
	if want := []string{"claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("models = %v, want %v", ids, want)
	}
	bad := newFixture(t, func(c *config.ProviderConfig) { c.APIKey = "wrong" })
	_, err = bad.p.Models(context.Background())
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || !apiErr.Auth() {
		t.Fatalf("err = %v, want an auth APIError", err)
	}
}

// TestConcurrentStreams: one Provider serves many calls at once (the agent
// runs several sessions); run with -race.
func TestConcurrentStreams(t *testing.T) {
	f := newFixture(t)
	f.script.Func = func(r fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "echo " + r.LastUserText()} }
	const n = 8
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var acc llm.Accumulator
			for d := range f.p.Stream(context.Background(), ask(fmt.Sprint("q", i))) {
				if err := acc.Add(d); err != nil {
					t.Errorf("call %d: %v", i, err)
					return
				}
			}
			msg, err := acc.Message()
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			got[i] = msg.Text()
		}()
	}
	wg.Wait()
	for i, text := range got {
		if want := fmt.Sprint("echo q", i); text != want {
			t.Errorf("call %d answered %q, want %q", i, text, want)
		}
	}
}

// TestRefusalWithoutBody: a refusal whose body is empty (a proxy's, a load
// balancer's) still gives a classified APIError with the server's wait; the
// cause names the call and the request id.
func TestRefusalWithoutBody(t *testing.T) {
	p := New("claude", config.ProviderConfig{}, nil, nil)
	httpReq := httptest.NewRequest(http.MethodPost, "https://api.anthropic.com/v1/messages", nil)
	resp := &http.Response{StatusCode: 429, Request: httpReq,
		Header: http.Header{"Retry-After": {"4"}, "Request-Id": {"req_011"}}}
	err := p.apiError(resp, nil)
	if err.Status != 429 || err.RetryAfter != 4*time.Second || !err.Retryable() || err.Message != "Too Many Requests" {
		t.Fatalf("err = %#v, want a retryable 429 waiting 4s", err)
	}
	if want := "POST /v1/messages: 429 Too Many Requests (request-id req_011)"; err.Err == nil || err.Err.Error() != want {
		t.Errorf("cause = %v, want %q", err.Err, want)
	}
}

// TestRequestHeaders: the key, the API version and the content types go
// with every call; extra headers from the config are added and may override.
func TestRequestHeaders(t *testing.T) {
	f := newFixture(t, func(c *config.ProviderConfig) {
		c.ExtraHeaders = map[string]string{"anthropic-beta": "interleaved-thinking-2025-05-14"}
	})
	if res := run(t, f.p, context.Background(), ask("hi")); res.err != nil {
		t.Fatalf("call failed: %v", res.err)
	}
	h := f.script.Requests()[0].Header
	want := map[string]string{
		"X-Api-Key": anthropicfake.APIKey, "Anthropic-Version": "2023-06-01",
		"Content-Type": "application/json", "Accept": "text/event-stream",
		"Anthropic-Beta": "interleaved-thinking-2025-05-14",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}
