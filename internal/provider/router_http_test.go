package provider

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/gemini"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// httpRig is a router over two OpenAI adapters (Chat Completions or
// Responses, per kind) talking HTTP to two fake OpenAI servers: "primary"
// (the default route) and "backup" (its fallback).
type httpRig struct {
	router          *Router
	clock           *fakeClock
	primary, backup *openaifake.Server
}

func newHTTPRig(t *testing.T, kind, primaryKey string) *httpRig {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	rig := &httpRig{clock: newFakeClock(), primary: openaifake.New(t, nil), backup: openaifake.New(t, nil)}
	if primaryKey == "" {
		primaryKey = rig.primary.APIKey()
	}
	log := zaptest.NewLogger(t)
	adapter := func(name string, cfg config.ProviderConfig) Streamer {
		cfg.Kind, cfg.Timeout = kind, time.Minute
		if kind == openai.ResponsesAPI {
			return openai.NewResponses(name, cfg, hc, log)
		}
		return openai.New(name, cfg, hc, log)
	}
	providers := map[string]Streamer{
		"primary": adapter("primary", config.ProviderConfig{APIKey: primaryKey, BaseURL: rig.primary.URL()}),
		"backup":  adapter("backup", config.ProviderConfig{APIKey: rig.backup.APIKey(), BaseURL: rig.backup.URL()}),
	}
	rig.router = NewRouter(providers, Options{
		Default:          "primary/gpt-4o-mini",
		DefaultFallbacks: []string{"backup/gpt-4o"},
		MaxRetries:       map[string]int{"primary": 1, "backup": 1},
		Clock:            rig.clock,
		Jitter:           halfJitter,
	}, log)
	return rig
}

func (rig *httpRig) complete(t *testing.T) (llm.Message, int, error) {
	t.Helper()
	starts := 0
	msg, err := rig.router.Complete(context.Background(), "", llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}},
		func(d llm.Delta) {
			if d.Kind == llm.DeltaStart {
				starts++
			}
		})
	return msg, starts, err
}

func TestRouterOverHTTP(t *testing.T) {
	for _, kind := range []string{openai.API, openai.ResponsesAPI} {
		t.Run(kind, func(t *testing.T) { routerOverHTTP(t, kind) })
	}
}

func routerOverHTTP(t *testing.T, kind string) {
	t.Run("429 with Retry-After then 500, then the fallback answers", func(t *testing.T) {
		rig := newHTTPRig(t, kind, "")
		rig.primary.Script().Push(fakellm.Reply{Status: 429, RetryAfter: "2"}, fakellm.Reply{Status: 500})
		rig.backup.Script().Push(fakellm.Reply{Text: "served by the backup"})
		msg, starts, err := rig.complete(t)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text() != "served by the backup" || msg.Meta.Provider != "backup" || msg.Meta.API != kind ||
			msg.Meta.Model != "gpt-4o" || msg.Meta.Route != "primary/gpt-4o-mini" {
			t.Errorf("answer %q meta %+v", msg.Text(), msg.Meta)
		}
		if got := rig.clock.Waits(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
			t.Errorf("waits = %v, want the server's Retry-After of 2s", got)
		}
		if p, b := len(rig.primary.Script().Requests()), len(rig.backup.Script().Requests()); p != 2 || b != 1 || starts != 3 {
			t.Errorf("primary %d, backup %d requests, %d starts", p, b, starts)
		}
	})
	t.Run("refused key: no fallback, a clear error", func(t *testing.T) {
		rig := newHTTPRig(t, kind, "sk-wrong-key-for-test")
		rig.backup.Script().Push(fakellm.Reply{Text: "must not be asked"})
		_, _, err := rig.complete(t)
		var api *llm.APIError
		if !errors.As(err, &api) || !api.Auth() || api.Provider != "primary" {
			t.Fatalf("err = %v, want the primary's auth error", err)
		}
		if strings.Contains(err.Error(), "sk-wrong-key-for-test") {
			t.Errorf("error leaks the key: %v", err)
		}
		if b := len(rig.backup.Script().Requests()); b != 0 {
			t.Errorf("fallback asked %d times after an auth error", b)
		}
		if w := rig.clock.Waits(); len(w) != 0 {
			t.Errorf("auth error retried after %v", w)
		}
	})
	t.Run("empty answers (response.incomplete with nothing) fall back", func(t *testing.T) {
		rig := newHTTPRig(t, kind, "")
		rig.primary.Script().Push(fakellm.Reply{Stop: llm.StopOther}, fakellm.Reply{})
		rig.backup.Script().Push(fakellm.Reply{Text: "served by the backup"})
		msg, starts, err := rig.complete(t)
		if err != nil || msg.Text() != "served by the backup" || starts != 3 {
			t.Errorf("answer %q after %d starts, err %v", msg.Text(), starts, err)
		}
	})
	t.Run("truncated streams retried, then the fallback answers", func(t *testing.T) {
		rig := newHTTPRig(t, kind, "")
		rig.primary.Script().Push(fakellm.Reply{Text: "an answer that stops", Truncate: true}, fakellm.Reply{Text: "again", Truncate: true})
		rig.backup.Script().Push(fakellm.Reply{Text: "complete answer"})
		msg, starts, err := rig.complete(t)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text() != "complete answer" || starts != 3 {
			t.Errorf("answer %q after %d starts", msg.Text(), starts)
		}
		if got := rig.clock.Waits(); !slices.Equal(got, []time.Duration{500 * time.Millisecond}) {
			t.Errorf("waits = %v", got)
		}
	})
}

// geminiRig is a router whose default route is a Gemini adapter talking to
// the strict fake Gemini server, with an OpenAI fallback: the router's
// retries, Retry-After handling and fallback work the same across
// protocols.
type geminiRig struct {
	router *Router
	clock  *fakeClock
	gemini *geminifake.Server
	backup *openaifake.Server
}

func newGeminiRig(t *testing.T, key string) *geminiRig {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	rig := &geminiRig{clock: newFakeClock(), gemini: geminifake.New(t, nil), backup: openaifake.New(t, nil)}
	if key == "" {
		key = geminifake.APIKey
	}
	log := zaptest.NewLogger(t)
	providers := map[string]Streamer{
		"gemini": gemini.New("gemini", config.ProviderConfig{Kind: "gemini", APIKey: key, BaseURL: rig.gemini.URL(), Timeout: time.Minute}, hc, log),
		"backup": openai.New("backup", config.ProviderConfig{Kind: "openai", APIKey: rig.backup.APIKey(), BaseURL: rig.backup.URL(), Timeout: time.Minute}, hc, log),
	}
	rig.router = NewRouter(providers, Options{
		Default:          "gemini/gemini-2.5-flash",
		DefaultFallbacks: []string{"backup/gpt-4o"},
		MaxRetries:       map[string]int{"gemini": 1, "backup": 1},
		Clock:            rig.clock,
		Jitter:           halfJitter,
	}, log)
	return rig
}

func TestRouterOverHTTPWithGemini(t *testing.T) {
	complete := func(rig *geminiRig) (llm.Message, error) {
		return rig.router.Complete(context.Background(), "", llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}, nil)
	}
	t.Run("429 with RetryInfo then 503, then the fallback answers", func(t *testing.T) {
		rig := newGeminiRig(t, "")
		rig.gemini.Script().Push(fakellm.Reply{Status: 429, RetryAfterMS: "2000"}, fakellm.Reply{Status: 503})
		rig.backup.Script().Push(fakellm.Reply{Text: "served by the backup"})
		msg, err := complete(rig)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text() != "served by the backup" || msg.Meta.Provider != "backup" || msg.Meta.Route != "gemini/gemini-2.5-flash" {
			t.Errorf("answer %q meta %+v", msg.Text(), msg.Meta)
		}
		if got := rig.clock.Waits(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
			t.Errorf("waits = %v, want RetryInfo's 2s", got)
		}
	})
	t.Run("refused key: no fallback, a clear error", func(t *testing.T) {
		rig := newGeminiRig(t, "AIzaWrongKeyForTheRouterTest")
		_, err := complete(rig)
		var api *llm.APIError
		if !errors.As(err, &api) || !api.Auth() || api.Provider != "gemini" {
			t.Fatalf("err = %v, want gemini's auth error", err)
		}
		if strings.Contains(err.Error(), "AIzaWrongKey") || len(rig.backup.Script().Requests()) != 0 || len(rig.clock.Waits()) != 0 {
			t.Errorf("err %v; backup asked %d times; waits %v", err, len(rig.backup.Script().Requests()), rig.clock.Waits())
		}
	})
	// Gemini's frequent finish reasons with nothing to use were a
	// successful empty answer, and the fallback was never asked
	// (docs/reliability.md#every-turn-ends-with-something-to-read).
	t.Run("MALFORMED_FUNCTION_CALL twice, then the fallback answers", func(t *testing.T) {
		rig := newGeminiRig(t, "")
		rig.gemini.Script().Push(fakellm.Reply{Stop: llm.StopMalformedCall}, fakellm.Reply{Stop: llm.StopMalformedCall})
		rig.backup.Script().Push(fakellm.Reply{Text: "served by the backup"})
		msg, err := complete(rig)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text() != "served by the backup" || len(rig.gemini.Script().Requests()) != 2 || len(rig.clock.Waits()) != 0 {
			t.Errorf("answer %q; gemini asked %d times; waits %v", msg.Text(), len(rig.gemini.Script().Requests()), rig.clock.Waits())
		}
	})
	t.Run("OTHER with no content is asked once more", func(t *testing.T) {
		rig := newGeminiRig(t, "")
		rig.gemini.Script().Push(fakellm.Reply{Stop: llm.StopOther}, fakellm.Reply{Text: "complete answer"})
		msg, err := complete(rig)
		if err != nil || msg.Text() != "complete answer" || len(rig.backup.Script().Requests()) != 0 {
			t.Errorf("answer %q, err %v", msg.Text(), err)
		}
	})
	t.Run("MAX_TOKENS and SAFETY are answers, not failures", func(t *testing.T) {
		for _, stop := range []llm.StopReason{llm.StopLength, llm.StopSafety, llm.StopRecitation} {
			rig := newGeminiRig(t, "")
			rig.gemini.Script().Push(fakellm.Reply{Thinking: "thought", Stop: stop})
			msg, err := complete(rig)
			if err != nil || msg.Stop() != stop || len(rig.gemini.Script().Requests()) != 1 {
				t.Errorf("%s: stop %q, err %v, %d requests", stop, msg.Stop(), err, len(rig.gemini.Script().Requests()))
			}
		}
	})
	t.Run("a stream cut mid-way is retried on Gemini", func(t *testing.T) {
		rig := newGeminiRig(t, "")
		rig.gemini.Script().Push(fakellm.Reply{Text: "an answer that stops", Truncate: true}, fakellm.Reply{Text: "complete answer"})
		msg, err := complete(rig)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text() != "complete answer" || msg.Meta.API != "gemini" || len(rig.backup.Script().Requests()) != 0 {
			t.Errorf("answer %q meta %+v", msg.Text(), msg.Meta)
		}
	})
}
