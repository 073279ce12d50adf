package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestCountersAndHistograms(t *testing.T) {
	m := New(BuildInfo{Version: "v1.2.3", GoVersion: "go1.26"})
	m.TurnDone("answered", 1500*time.Millisecond)
	m.TurnDone("answered", 3*time.Second)
	m.TurnDone("interrupted", 20*time.Second)
	answer := llm.Message{Role: llm.RoleAssistant, Meta: &llm.Meta{Provider: "openai", Model: "gpt-4o-mini",
		Usage: llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 64, ReasoningTokens: 12}}}
	m.ModelCall("", llm.MetricOK, 800*time.Millisecond, answer)
	m.ModelCall("smart", llm.MetricUnavailable, 5*time.Second, llm.Message{})
	m.ToolCall("read_file", false, 2*time.Millisecond)
	m.ToolCall("exec", true, time.Second)
	m.PlatformCall("telegram", "send", "ok")
	m.PlatformCall("telegram", "send", "rate_limited")
	m.PlatformCall("telegram", "send", "ok")

	want := `
# HELP nanobot_turns_total Turns finished, by outcome: answered, failed, stopped (/stop) or interrupted (shutdown).
# TYPE nanobot_turns_total counter
nanobot_turns_total{outcome="answered"} 2
nanobot_turns_total{outcome="interrupted"} 1
# HELP nanobot_llm_calls_total Model calls (retries and fallbacks included in one call), by route asked for and outcome: ok, cancelled, rate_limited, auth, quota, unavailable, rejected or error.
# TYPE nanobot_llm_calls_total counter
nanobot_llm_calls_total{outcome="ok",route="default"} 1
nanobot_llm_calls_total{outcome="unavailable",route="smart"} 1
# HELP nanobot_llm_tokens_total Tokens used by successful model calls, by route asked for, provider/model that answered and kind: input, output, cache_read, cache_write or reasoning (the part of output spent thinking).
# TYPE nanobot_llm_tokens_total counter
nanobot_llm_tokens_total{kind="cache_read",model="openai/gpt-4o-mini",route="default"} 64
nanobot_llm_tokens_total{kind="input",model="openai/gpt-4o-mini",route="default"} 100
nanobot_llm_tokens_total{kind="output",model="openai/gpt-4o-mini",route="default"} 20
nanobot_llm_tokens_total{kind="reasoning",model="openai/gpt-4o-mini",route="default"} 12
# HELP nanobot_tool_calls_total Tool calls, by tool and outcome (ok or error); calls of tools that do not exist count as tool "unknown".
# TYPE nanobot_tool_calls_total counter
nanobot_tool_calls_total{outcome="error",tool="exec"} 1
nanobot_tool_calls_total{outcome="ok",tool="read_file"} 1
# HELP nanobot_channel_calls_total Calls to a chat platform (each attempt), by channel, operation (send, edit, delete, send media, typing) and outcome: ok, not_modified, rate_limited, bad_markup, unknown_outcome, permanent, canceled or transient.
# TYPE nanobot_channel_calls_total counter
nanobot_channel_calls_total{channel="telegram",op="send",outcome="ok"} 2
nanobot_channel_calls_total{channel="telegram",op="send",outcome="rate_limited"} 1
`
	compareFamilies(t, scrape(t, m), want,
		"nanobot_turns_total", "nanobot_llm_calls_total", "nanobot_llm_tokens_total",
		"nanobot_tool_calls_total", "nanobot_channel_calls_total")

	// Histograms: each observation lands in the right bucket.
	if got := m.turns.with("answered").Get(); got != 2 {
		t.Errorf("answered turns = %v", got)
	}
	hist := scrape(t, m)
	for _, line := range []string{
		`nanobot_turn_duration_seconds_bucket{outcome="answered",le="1"} 0`,
		`nanobot_turn_duration_seconds_bucket{outcome="answered",le="2"} 1`,
		`nanobot_turn_duration_seconds_bucket{outcome="answered",le="5"} 2`,
		`nanobot_turn_duration_seconds_sum{outcome="answered"} 4.5`,
		`nanobot_llm_call_duration_seconds_bucket{route="default",le="1"} 1`,
		`nanobot_llm_call_duration_seconds_count{route="smart"} 1`,
		`nanobot_tool_call_duration_seconds_bucket{tool="read_file",le="0.005"} 1`,
		`nanobot_build_info{goversion="go1.26",version="v1.2.3"} 1`,
	} {
		if !strings.Contains(hist, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

func TestGaugesAreReadAtScrapeTime(t *testing.T) {
	m := New(BuildInfo{Version: "dev"})
	in, out, cached, weight := 0, 0, 0, int64(0)
	var tgErr error
	leading := false
	m.WatchQueues(func() int { return in }, func() int { return out })
	m.WatchLeader(func() bool { return leading })
	m.WatchSessions(func() int { return cached }, func() int64 { return weight })
	m.WatchChannel("telegram", func() error { return tgErr })
	m.WatchChannel("discord", func() error { return nil })

	in, out, cached, weight, tgErr, leading = 3, 1, 7, 4096, errors.New("getUpdates: connection refused"), true
	got := scrape(t, m)
	for _, line := range []string{
		`nanobot_bus_queue_depth{queue="inbound"} 3`,
		`nanobot_bus_queue_depth{queue="outbound"} 1`,
		`nanobot_sessions_cached 7`,
		`nanobot_sessions_cached_bytes 4096`,
		`nanobot_channel_up{channel="telegram"} 0`,
		`nanobot_channel_up{channel="discord"} 1`,
		`nanobot_scheduler_leader 1`,
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	tgErr = nil
	if got := scrape(t, m); !strings.Contains(got, `nanobot_channel_up{channel="telegram"} 1`+"\n") {
		t.Error("channel_up did not follow the channel's recovery")
	}
	for _, family := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes"} {
		if !strings.Contains(got, "\n"+family+" ") {
			t.Errorf("/metrics lacks the runtime metric %s", family)
		}
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestAPIRequestsByKeyAndOutcome(t *testing.T) {
	m := New(BuildInfo{})
	m.APIRequest("webui", "ok", 300*time.Millisecond)
	m.APIRequest("webui", "ok", 3*time.Second)
	m.APIRequest("unknown", "unauthorized", time.Millisecond)
	if got := m.apiCalls.with("webui", "ok").Get(); got != 2 {
		t.Errorf("webui ok = %v", got)
	}
	hist := scrape(t, m)
	for _, line := range []string{
		`nanobot_api_requests_total{key="unknown",outcome="unauthorized"} 1`,
		`nanobot_api_request_duration_seconds_bucket{key="webui",le="0.5"} 1`,
		`nanobot_api_request_duration_seconds_count{key="webui"} 2`,
	} {
		if !strings.Contains(hist, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestUsageRecorded: the ledger's counters by model and origin, counted
// through the series UsageRecorded keeps; a kind or outcome never counted
// has no series.
func TestUsageRecorded(t *testing.T) {
	m := New(BuildInfo{})
	m.UsageRecorded("openai/gpt-4o", "turn", "ok", llm.Usage{InputTokens: 100, OutputTokens: 20}, 0.5, true)
	m.UsageRecorded("openai/gpt-4o", "turn", "retried", llm.Usage{InputTokens: 50, ReasoningTokens: 3}, 0.25, true)
	m.UsageRecorded("local/llama", "cron", "ok", llm.Usage{OutputTokens: 7}, 0, false)
	want := `
# HELP nanobot_usage_calls_total Model call attempts in the usage ledger (docs/usage.md), by provider/model, origin (turn, api, heartbeat, cron, consolidation, subagent, transcription) and outcome (ok, retried, failed).
# TYPE nanobot_usage_calls_total counter
nanobot_usage_calls_total{model="local/llama",origin="cron",outcome="ok"} 1
nanobot_usage_calls_total{model="openai/gpt-4o",origin="turn",outcome="ok"} 1
nanobot_usage_calls_total{model="openai/gpt-4o",origin="turn",outcome="retried"} 1
# HELP nanobot_usage_tokens_total Tokens in the usage ledger, every attempt, by provider/model, origin and kind: input (not from the cache), output, cache_read, cache_write or reasoning (the part of output spent thinking).
# TYPE nanobot_usage_tokens_total counter
nanobot_usage_tokens_total{kind="input",model="openai/gpt-4o",origin="turn"} 150
nanobot_usage_tokens_total{kind="output",model="local/llama",origin="cron"} 7
nanobot_usage_tokens_total{kind="output",model="openai/gpt-4o",origin="turn"} 20
nanobot_usage_tokens_total{kind="reasoning",model="openai/gpt-4o",origin="turn"} 3
# HELP nanobot_usage_cost_usd_total What the priced attempts in the usage ledger cost, in USD, by provider/model and origin; unpriced models count in nanobot_usage_unpriced_calls_total instead.
# TYPE nanobot_usage_cost_usd_total counter
nanobot_usage_cost_usd_total{model="openai/gpt-4o",origin="turn"} 0.75
# HELP nanobot_usage_unpriced_calls_total Attempts of models without a price (prices:), by provider/model and origin.
# TYPE nanobot_usage_unpriced_calls_total counter
nanobot_usage_unpriced_calls_total{model="local/llama",origin="cron"} 1
`
	compareFamilies(t, scrape(t, m), want, "nanobot_usage_calls_total", "nanobot_usage_tokens_total",
		"nanobot_usage_cost_usd_total", "nanobot_usage_unpriced_calls_total")
}

// compareFamilies checks that each family's lines on /metrics (HELP, TYPE,
// samples) are the ones want gives for it, in the same order.
func compareFamilies(t *testing.T, body, want string, families ...string) {
	t.Helper()
	for _, f := range families {
		if got, w := familyLines(body, f), familyLines(want, f); got != w {
			t.Errorf("%s:\n got %s\nwant %s", f, got, w)
		}
	}
}

func familyLines(text, family string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# HELP "+family+" ") || strings.HasPrefix(line, "# TYPE "+family+" ") ||
			strings.HasPrefix(line, family+"{") || strings.HasPrefix(line, family+" ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestLabelValuesEscaped: a label value with a quote, a backslash or a
// line break (a tool or route name is the user's) is escaped, not a
// broken line or a panic.
func TestLabelValuesEscaped(t *testing.T) {
	m := New(BuildInfo{})
	m.ToolCall("we\"ird\\na\nme", false, time.Millisecond)
	if body := scrape(t, m); !strings.Contains(body, `nanobot_tool_calls_total{outcome="ok",tool="we\"ird\\na\nme"} 1`+"\n") {
		t.Errorf("escaped label missing:\n%s", familyLines(body, "nanobot_tool_calls_total"))
	}
}
