package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/metrics"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// Each model call is counted and told to readiness as llm.Policies say,
// through the real router and OpenAI adapter against the fake. The
// caller's own deadline is a stop, like a cancellation: it used to count
// as "unavailable" and make /readyz report the provider down, while the
// router gave up at once as for a cancellation.
func TestObservedModelCountsAsTheTableSays(t *testing.T) {
	srv := openaifake.New(t, nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	log := zaptest.NewLogger(t)
	p := openai.New("openai", config.ProviderConfig{Kind: "openai", APIKey: srv.APIKey(), BaseURL: srv.URL(), Timeout: time.Minute},
		&http.Client{Transport: tr}, log)
	router := provider.NewRouter(map[string]provider.Streamer{"openai": p}, provider.Options{
		Default: "openai/gpt-4o-mini", MaxRetries: map[string]int{"openai": 0},
	}, log)
	m := metrics.New(metrics.BuildInfo{})
	h := &health.ModelHealth{}
	model := observedModel{Model: router, metrics: m, health: h}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("hi")}}}}
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()

	tests := []struct {
		name   string
		ctx    context.Context
		reply  fakellm.Reply
		metric string
		ready  bool // /readyz after the call
	}{
		{"answer", context.Background(), fakellm.Reply{Text: "fine"}, "ok", true},
		{"503", context.Background(), fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded"}, "unavailable", false},
		{"answer again", context.Background(), fakellm.Reply{Text: "fine again"}, "ok", true},
		{"caller's deadline", past, fakellm.Reply{Text: "never asked"}, "deadline", true},
		{"429", context.Background(), fakellm.Reply{Status: 429, ErrorType: "rate_limit_error", ErrorMessage: "slow down"}, "rate_limited", true},
		{"401", context.Background(), fakellm.Reply{Status: 401, ErrorType: "invalid_request_error", ErrorMessage: "bad key"}, "auth", false},
		{"caller's deadline after a refused key", past, fakellm.Reply{Text: "never asked"}, "deadline", false},
	}
	counted := map[string]int{}
	for _, tt := range tests {
		if tt.ctx == context.Background() {
			srv.Script().Push(tt.reply)
		}
		_, _ = model.Complete(tt.ctx, "", req, nil)
		counted[tt.metric]++
		if ready := h.Check() == nil; ready != tt.ready {
			t.Errorf("%s: ready = %v, want %v (%v)", tt.name, ready, tt.ready, h.Check())
		}
	}
	body := scrape(t, m)
	for outcome, n := range counted {
		line := `nanobot_llm_calls_total{outcome="` + outcome + `",route="default"} ` + strconv.Itoa(n)
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, grep(body, "nanobot_llm_calls_total"))
		}
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
