package anthropic

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testModel = "claude-haiku-4-5"

// fixture is a provider talking to a fresh strict fake.
type fixture struct {
	script *fakellm.Script
	srv    *anthropicfake.Server
	p      *Provider
}

func newFixture(t testing.TB, mutate ...func(*config.ProviderConfig)) *fixture {
	t.Helper()
	script := &fakellm.Script{}
	srv := anthropicfake.New(t, script)
	cfg := config.ProviderConfig{Kind: "anthropic", APIKey: anthropicfake.APIKey, BaseURL: srv.URL()}
	for _, m := range mutate {
		m(&cfg)
	}
	return &fixture{script: script, srv: srv, p: New("claude", cfg, srv.Client(), zaptest.NewLogger(t))}
}

// outcome is one stream run through the Accumulator.
type outcome struct {
	deltas []llm.Delta
	msg    llm.Message
	err    error // the accumulated outcome: the terminal error, if any
}

// run streams req and feeds every delta to an Accumulator, failing the test
// on any contract violation (start first, one terminal, increasing seq...).
func run(t testing.TB, p *Provider, ctx context.Context, req llm.Request) outcome {
	t.Helper()
	var acc llm.Accumulator
	var res outcome
	for d := range p.Stream(ctx, req) {
		res.deltas = append(res.deltas, d)
		if err := acc.Add(d); err != nil && !errors.Is(err, d.Err) {
			t.Fatalf("delta contract violated: %v (deltas %+v)", err, res.deltas)
		}
	}
	if !acc.Ended() {
		t.Fatalf("stream ended without a terminal delta: %+v", res.deltas)
	}
	res.msg, res.err = acc.Message()
	return res
}

func userText(s string) llm.Message { return llm.NewText(llm.RoleUser, s) }

func ask(s string) llm.Request {
	return llm.Request{Model: testModel, Messages: []llm.Message{userText(s)}}
}

// noRejections fails the test if the strict fake refused any request.
func noRejections(t testing.TB, srv *anthropicfake.Server) {
	t.Helper()
	for _, r := range srv.Rejected() {
		t.Errorf("fake refused a request: %d %s: %s", r.Status, r.Type, r.Message)
	}
}
