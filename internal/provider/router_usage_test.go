package provider

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/anthropic"
	"github.com/nanobot-go/nanobot/internal/provider/gemini"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// usageRig is a router over one adapter of each protocol, each talking
// HTTP to its fake server, recording into a real ledger.
type usageRig struct {
	router                *Router
	ledger                *usage.Ledger
	chat, responses       *openaifake.Server
	anthropic             *anthropicfake.Server
	gemini                *geminifake.Server
	chatS, anthS, geminiS *fakellm.Script
}

func newUsageRig(t *testing.T, budget Admitter) *usageRig {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	log := zaptest.NewLogger(t)
	rig := &usageRig{chatS: &fakellm.Script{}, anthS: &fakellm.Script{}, geminiS: &fakellm.Script{}}
	rig.chat = openaifake.New(t, rig.chatS)
	rig.responses = openaifake.New(t, nil)
	rig.anthropic = anthropicfake.New(t, rig.anthS)
	rig.gemini = geminifake.New(t, rig.geminiS)
	clock := newFakeClock()
	l, err := usage.Open(t.TempDir(), usage.Options{Now: clock.Now, Prices: usage.NewPriceTable(map[string]usage.Price{"responses/gpt-5": {Input: 1.25, Output: 10, CacheRead: 0.125}}), SyncEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	rig.ledger = l
	pc := func(kind, key, url string) config.ProviderConfig {
		return config.ProviderConfig{Kind: kind, APIKey: key, BaseURL: url, Timeout: time.Minute}
	}
	rig.router = NewRouter(map[string]Streamer{
		"openai":    openai.New("openai", pc(openai.API, rig.chat.APIKey(), rig.chat.URL()), hc, log),
		"responses": openai.NewResponses("responses", pc(openai.ResponsesAPI, rig.responses.APIKey(), rig.responses.URL()), hc, log),
		"anthropic": anthropic.New("anthropic", pc(anthropic.API, anthropicfake.APIKey, rig.anthropic.URL()), hc, log),
		"gemini":    gemini.New("gemini", pc(gemini.API, geminifake.APIKey, rig.gemini.URL()), hc, log),
	}, Options{
		Default:    "openai/gpt-4o",
		Routes:     map[string]RouteSpec{"careful": {Model: "anthropic/claude-sonnet-4-5", Fallbacks: []string{"gemini/gemini-2.5-flash"}}},
		MaxRetries: map[string]int{"openai": 1, "anthropic": 1, "gemini": 1, "responses": 1},
		Clock:      clock, Jitter: halfJitter, Usage: l, Budget: budget,
	}, log)
	return rig
}

func (rig *usageRig) records(t *testing.T) usage.Report {
	t.Helper()
	rep, err := rig.ledger.Query(usage.Query{Period: usage.Today(rig.ledger.Now(), time.UTC), By: usage.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func ask(rig *usageRig, route string) (llm.Message, error) {
	ctx := usage.WithCall(context.Background(), usage.Call{Origin: usage.OriginTurn, Session: "telegram:1", Chat: "telegram:1"})
	return rig.router.Complete(ctx, route, llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hello there")}}, nil)
}

// TestRouterRecordsVendorUsage: each protocol's usage fields, as its fake
// server sends them, land in the ledger: cached and reasoning tokens
// (OpenAI Chat and Responses), cache reads and writes (Anthropic), cached
// content and thoughts (Gemini).
func TestRouterRecordsVendorUsage(t *testing.T) {
	reply := fakellm.Reply{Text: "answer", Thinking: "let me think about this for a while", InputTokens: 1200, OutputTokens: 300,
		CachedTokens: 1000, CacheReadTokens: 800, CacheWriteTokens: 150}
	tests := []struct {
		route  string
		script func(*usageRig) *fakellm.Script
		want   usage.Totals
	}{
		{"openai/gpt-4o", func(r *usageRig) *fakellm.Script { return r.chatS },
			usage.Totals{Calls: 1, Input: 200, CacheRead: 1000, Output: 300, Reasoning: 8}},
		{"responses/gpt-5", func(r *usageRig) *fakellm.Script { return r.responses.Script() },
			usage.Totals{Calls: 1, Input: 200, CacheRead: 1000, Output: 300, Reasoning: 8}},
		{"anthropic/claude-sonnet-4-5", func(r *usageRig) *fakellm.Script { return r.anthS },
			usage.Totals{Calls: 1, Input: 1200, CacheRead: 800, CacheWrite: 150, Output: 300}},
		{"gemini/gemini-2.5-flash", func(r *usageRig) *fakellm.Script { return r.geminiS },
			usage.Totals{Calls: 1, Input: 200, CacheRead: 1000, Output: 309, Reasoning: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.route, func(t *testing.T) {
			rig := newUsageRig(t, nil)
			tt.script(rig).Push(reply)
			if _, err := ask(rig, tt.route); err != nil {
				t.Fatal(err)
			}
			rep := rig.records(t)
			got := rep.Total
			got.Cost = usage.Cost{}
			if got != tt.want {
				t.Errorf("recorded %+v, want %+v", got, tt.want)
			}
			if len(rep.Groups) != 1 || rep.Groups[0].Key != tt.route || !rep.Groups[0].Cost.Known() || rep.Groups[0].Cost.PricedNanos() == 0 {
				t.Errorf("groups %+v: want one priced group %s", rep.Groups, tt.route)
			}
		})
	}
}

// TestRouterRecordsEveryAttempt: a retried attempt, a failed one the
// provider billed (Anthropic's prompt counted before the stream broke)
// and the fallback that answered are all in the ledger, with the caller.
func TestRouterRecordsEveryAttempt(t *testing.T) {
	rig := newUsageRig(t, nil)
	rig.anthS.Push(
		fakellm.Reply{Status: 529}, // overloaded: retried, nothing billed
		fakellm.Reply{Text: "half an answ", InputTokens: 500, MidStreamError: "api_error"}, // billed, then broken
	)
	rig.geminiS.Push(fakellm.Reply{Text: "the fallback's answer", InputTokens: 40, OutputTokens: 8})
	msg, err := ask(rig, "careful")
	if err != nil || msg.Text() != "the fallback's answer" {
		t.Fatalf("answer %q, err %v", msg.Text(), err)
	}
	rep := rig.records(t)
	if rep.Total.Calls != 3 || rep.Total.Failed != 2 {
		t.Errorf("total %+v: want 3 attempts, 2 failed", rep.Total)
	}
	byModel := map[string]usage.Totals{}
	for _, g := range rep.Groups {
		byModel[g.Key] = g.Totals
	}
	if a := byModel["anthropic/claude-sonnet-4-5"]; a.Calls != 2 || a.Failed != 2 || a.Input != 500 || !a.Cost.Known() || a.Cost.PricedNanos() == 0 {
		t.Errorf("anthropic %+v: want two failed attempts, the second billed 500 input tokens", a)
	}
	if g := byModel["gemini/gemini-2.5-flash"]; g.Calls != 1 || g.Failed != 0 || g.Input != 40 || g.Output != 8 {
		t.Errorf("gemini %+v", g)
	}
	origins, _ := rig.ledger.Query(usage.Query{Period: usage.Today(rig.ledger.Now(), time.UTC), By: usage.ByOrigin, Chat: "telegram:1"})
	if len(origins.Groups) != 1 || origins.Groups[0].Key != "turn" || origins.Groups[0].Calls != 3 {
		t.Errorf("by origin: %+v", origins.Groups)
	}

	// The last attempt failing, with no fallback left: recorded as failed.
	rig.chatS.Push(fakellm.Reply{Status: 400})
	if _, err := ask(rig, "openai/gpt-4o"); err == nil {
		t.Fatal("a 400 succeeded")
	}
	if rep := rig.records(t); rep.Total.Calls != 4 || rep.Total.Failed != 3 {
		t.Errorf("after a refused call: %+v", rep.Total)
	}
}

// TestRouterRecordsBrokenGeminiStream: a Gemini stream that breaks after
// its chunks reported usage (an error object mid-stream, or the connection
// dropped) is billed, so its attempt counts those tokens, as Anthropic's
// does.
func TestRouterRecordsBrokenGeminiStream(t *testing.T) {
	tests := []struct {
		name   string
		broken fakellm.Reply
	}{
		{"error mid-stream", fakellm.Reply{Text: "half an answ", InputTokens: 300, OutputTokens: 5, MidStreamError: "UNAVAILABLE"}},
		{"connection dropped", fakellm.Reply{Text: "half an answ", InputTokens: 300, OutputTokens: 5, Truncate: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig := newUsageRig(t, nil)
			rig.geminiS.Push(tt.broken, fakellm.Reply{Text: "the retry's answer", InputTokens: 40, OutputTokens: 8})
			if msg, err := ask(rig, "gemini/gemini-2.5-flash"); err != nil || msg.Text() != "the retry's answer" {
				t.Fatalf("answer %q, err %v", msg.Text(), err)
			}
			got := rig.records(t).Total
			if got.Calls != 2 || got.Failed != 1 || got.Input != 340 || got.Output != 13 || !got.Cost.Known() {
				t.Errorf("recorded %+v: want the broken attempt's 300 in and 5 out beside the retry's 40 and 8", got)
			}
		})
	}
}

// TestRouterEstimatesMissingUsage: a server that reports no usage gets an
// estimate, marked.
func TestRouterEstimatesMissingUsage(t *testing.T) {
	rig := newUsageRig(t, nil)
	rig.chatS.Push(fakellm.Reply{Text: "an answer from a server that counts nothing", NoUsage: true})
	msg, err := ask(rig, "openai/gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Meta.Usage != (llm.Usage{}) {
		t.Fatalf("the fake sent usage %+v", msg.Meta.Usage)
	}
	rep := rig.records(t)
	if rep.Total.Estimated != 1 || rep.Total.Input == 0 || rep.Total.Output == 0 {
		t.Errorf("total %+v: want one estimated call with tokens", rep.Total)
	}
}

// budgetStub is an Admitter with a fixed verdict, for the router's side of
// the budget (the budget itself is tested in internal/usage).
type budgetStub struct{ d usage.Decision }

func (b budgetStub) Admit(ctx context.Context) (context.Context, usage.Decision) {
	if b.d.Verdict == usage.Stop {
		return ctx, b.d
	}
	c, _ := usage.CallFrom(ctx)
	c.Admitted, c.Reroute = true, b.d.Route
	return usage.WithCall(ctx, c), b.d
}

func TestRouterHonoursTheBudget(t *testing.T) {
	stop := usage.Decision{Verdict: usage.Stop, Text: "today's budget of $2 is spent; it resets at 00:00 UTC; /usage shows where it went."}
	rig := newUsageRig(t, budgetStub{stop})
	_, err := ask(rig, "openai/gpt-4o")
	if f := llm.Classify(err); f.Kind != llm.KindBudget || f.UserText() != "⚠️ "+stop.Text {
		t.Errorf("err %v classified %+v", err, f)
	}
	if n := len(rig.chatS.Requests()); n != 0 {
		t.Errorf("%d requests sent past a spent budget", n)
	}
	rig = newUsageRig(t, budgetStub{usage.Decision{Verdict: usage.Reroute, Route: "gemini/gemini-2.5-flash"}})
	rig.geminiS.Push(fakellm.Reply{Text: "cheap"})
	msg, err := ask(rig, "openai/gpt-4o")
	if err != nil || msg.Meta.Provider != "gemini" || len(rig.chatS.Requests()) != 0 {
		t.Errorf("rerouted answer %+v, err %v", msg.Meta, err)
	}
}
