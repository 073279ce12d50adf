package openai_test

import (
	"context"
	"iter"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

var _ provider.Streamer = (*openai.Provider)(nil)

// TestMain fails the package if any test leaves a goroutine behind (HTTP
// connections, fake handlers, stream readers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newProvider points an adapter named "test" at fake with the fake's key;
// edit adjusts the config first.
func newProvider(t *testing.T, fake *openaifake.Server, edit func(*config.ProviderConfig)) *openai.Provider {
	t.Helper()
	cfg := config.ProviderConfig{Kind: "openai", APIKey: fake.APIKey(), BaseURL: fake.URL()}
	if edit != nil {
		edit(&cfg)
	}
	return openai.New("test", cfg, testClient(t), zaptest.NewLogger(t))
}

// testClient returns a client with its own transport, whose idle connections
// are closed at cleanup so goleak sees no stray connection goroutines.
func testClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// result is everything a stream produced, run through llm.Accumulator so the
// delta contract is checked on every test.
type result struct {
	deltas []llm.Delta
	msg    llm.Message
	err    error // the accumulator's verdict: the error terminal's error, or nil
}

// collect drains seq through an Accumulator. A contract violation fails the
// test: the adapter must never emit one, whatever the server does.
func collect(t *testing.T, seq iter.Seq[llm.Delta]) result {
	t.Helper()
	var acc llm.Accumulator
	var r result
	for d := range seq {
		r.deltas = append(r.deltas, d)
		if err := acc.Add(d); err != nil {
			t.Fatalf("delta %d (%s): contract violation: %v", len(r.deltas), d.Kind, err)
		}
	}
	if len(r.deltas) == 0 || r.deltas[0].Seq != 1 {
		t.Fatalf("stream must start with seq 1, got %v", r.deltas)
	}
	if !acc.Ended() {
		t.Fatalf("stream ended without a terminal delta: %v", kinds(r.deltas))
	}
	r.msg, r.err = acc.Message()
	return r
}

func kinds(ds []llm.Delta) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Kind.String()
	}
	return out
}

func count(ds []llm.Delta, k llm.DeltaKind) int {
	n := 0
	for _, d := range ds {
		if d.Kind == k {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or a generous deadline passes; it is for
// conditions reached asynchronously (a server noticing a closed connection).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func userRequest(model, text string) llm.Request {
	return llm.Request{Model: model, System: "You are a test.", Messages: []llm.Message{llm.NewText(llm.RoleUser, text)}}
}

// newProviderWithClient is newProvider with a client the test controls.
func newProviderWithClient(t *testing.T, fake *openaifake.Server, client *http.Client) *openai.Provider {
	t.Helper()
	cfg := config.ProviderConfig{Kind: "openai", APIKey: fake.APIKey(), BaseURL: fake.URL()}
	return openai.New("test", cfg, client, zaptest.NewLogger(t))
}

// newRawProvider points an adapter at any base URL, without a key.
func newRawProvider(t *testing.T, baseURL string) *openai.Provider {
	t.Helper()
	return openai.New("test", config.ProviderConfig{Kind: "openai", BaseURL: baseURL}, testClient(t), zaptest.NewLogger(t))
}

func goleakIgnoreCurrent() goleak.Option { return goleak.IgnoreCurrent() }

// verifyNoLeaks fails t if goroutines other than those present when ignore
// was taken are still running (goleak retries for a while before failing).
func verifyNoLeaks(t *testing.T, ignore goleak.Option) {
	t.Helper()
	goleak.VerifyNone(t, ignore)
}
