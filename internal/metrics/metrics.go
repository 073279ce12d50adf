// Package metrics holds nanobot's Prometheus metrics
// (docs/operations.md#metrics): one registry with the counters and histograms
// the daemon feeds through small observer methods (turns, model calls, tools,
// platform calls), gauges read at scrape time (queue depth, cached sessions,
// channel health), build info and the Go runtime and process collectors. Its
// http.Handler serves /metrics.
//
// It imports only llm (for token usage and error classification) and the
// Prometheus client: the agent, tools and channels declare the observer
// interfaces they call, and the daemon plugs this package into them.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nanobot-go/nanobot/internal/llm"
)

const namespace = "nanobot"

// Buckets in seconds. A turn spans several model calls and tools, so its
// buckets reach further than a model call's; tools are mostly fast.
var (
	turnBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600}
	llmBuckets  = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}
	toolBuckets = []float64{0.001, 0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 60, 120}
)

// BuildInfo labels nanobot_build_info.
type BuildInfo struct {
	Version   string
	GoVersion string
}

// Metrics is the registry and its collectors. It is safe for concurrent
// use. Create it with New.
type Metrics struct {
	reg *prometheus.Registry

	turns       *prometheus.CounterVec
	turnSeconds *prometheus.HistogramVec
	llmCalls    *prometheus.CounterVec
	llmSeconds  *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	toolSeconds *prometheus.HistogramVec
	platform    *prometheus.CounterVec
	replies     *prometheus.CounterVec
	apiCalls    *prometheus.CounterVec
	apiSeconds  *prometheus.HistogramVec
	// The usage ledger's figures (UsageRecorded): every attempt, by model
	// and origin.
	usageCalls    *prometheus.CounterVec
	usageTokens   *prometheus.CounterVec
	usageCost     *prometheus.CounterVec
	usageUnpriced *prometheus.CounterVec
	usageMu       sync.Mutex
	usage         map[[2]string]*usageSeries // by model and origin
}

// New returns the metrics with every collector registered. It does no I/O:
// the process collector reads /proc only when scraped.
func New(info BuildInfo) *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{reg}
	m := &Metrics{
		reg: reg, usage: map[[2]string]*usageSeries{},
		turns: f.counter("turns_total",
			"Turns finished, by outcome: answered, failed, stopped (/stop) or interrupted (shutdown).", "outcome"),
		turnSeconds: f.histogram("turn_duration_seconds",
			"Time from a turn's start to its last reply, by outcome.", turnBuckets, "outcome"),
		llmCalls: f.counter("llm_calls_total",
			"Model calls (retries and fallbacks included in one call), by route asked for and outcome: "+
				"ok, cancelled, rate_limited, auth, quota, unavailable, rejected or error.", "route", "outcome"),
		llmSeconds: f.histogram("llm_call_duration_seconds",
			"Duration of a model call, retries and fallbacks included, by route.", llmBuckets, "route"),
		tokens: f.counter("llm_tokens_total",
			"Tokens used by successful model calls, by route asked for, provider/model that answered and kind: "+
				"input, output, cache_read, cache_write or reasoning (the part of output spent thinking).", "route", "model", "kind"),
		toolCalls: f.counter("tool_calls_total",
			"Tool calls, by tool and outcome (ok or error); calls of tools that do not exist count as tool \"unknown\".",
			"tool", "outcome"),
		toolSeconds: f.histogram("tool_call_duration_seconds", "Duration of a tool call, by tool.", toolBuckets, "tool"),
		platform: f.counter("channel_calls_total",
			"Calls to a chat platform (each attempt), by channel, operation (send, edit, delete, send media, typing) "+
				"and outcome: ok, not_modified, rate_limited, bad_markup, unknown_outcome, permanent, canceled or transient.",
			"channel", "op", "outcome"),
		replies: f.counter("replies_total",
			"Final answers and standalone messages the channels took from the agent, by channel, kind (final or message) "+
				"and outcome: delivered (reached the chat, page or API client), failed (given up on: refused, retries "+
				"exhausted) or cut (shutdown cut it short; the question is redelivered). Compare with turns_total{outcome=\"answered\"}, "+
				"which counts answers produced.", "channel", "kind", "outcome"),
		apiCalls: f.counter("api_requests_total",
			"Requests to the OpenAI-compatible API, by key name (\"unknown\" before authentication) and outcome: "+
				"ok, failed, client_closed, timeout, unavailable, unauthorized, rate_limited, busy, bad_request, not_found or too_large.",
			"key", "outcome"),
		apiSeconds: f.histogram("api_request_duration_seconds",
			"Time from an API request's arrival to its answer (or refusal), by key name.", turnBuckets, "key"),
		usageCalls: f.counter("usage_calls_total",
			"Model call attempts in the usage ledger (docs/usage.md), by provider/model, origin (turn, api, heartbeat, cron, "+
				"consolidation, subagent, transcription) and outcome (ok, retried, failed).", "model", "origin", "outcome"),
		usageTokens: f.counter("usage_tokens_total",
			"Tokens in the usage ledger, every attempt, by provider/model, origin and kind: input (not from the cache), "+
				"output, cache_read, cache_write or reasoning (the part of output spent thinking).", "model", "origin", "kind"),
		usageCost: f.counter("usage_cost_usd_total",
			"What the priced attempts in the usage ledger cost, in USD, by provider/model and origin; unpriced models "+
				"count in nanobot_usage_unpriced_calls_total instead.", "model", "origin"),
		usageUnpriced: f.counter("usage_unpriced_calls_total",
			"Attempts of models without a price (prices:), by provider/model and origin.", "model", "origin"),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "build_info",
			Help:        "Always 1; the labels say which nanobot is running.",
			ConstLabels: prometheus.Labels{"version": info.Version, "goversion": info.GoVersion},
		}, func() float64 { return 1 }),
	)
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// TurnDone counts a finished turn (the agent's Observer).
func (m *Metrics) TurnDone(outcome string, elapsed time.Duration) {
	m.turns.WithLabelValues(outcome).Inc()
	m.turnSeconds.WithLabelValues(outcome).Observe(elapsed.Seconds())
}

// ModelCall counts one model call on route ("" is reported as "default"):
// its outcome (llm.Policy.Metric), duration and, when it succeeded, the tokens
// of msg, labelled with the provider/model that answered.
func (m *Metrics) ModelCall(route, outcome string, elapsed time.Duration, msg llm.Message) {
	if route == "" {
		route = "default"
	}
	m.llmCalls.WithLabelValues(route, outcome).Inc()
	m.llmSeconds.WithLabelValues(route).Observe(elapsed.Seconds())
	if outcome != llm.MetricOK || msg.Meta == nil {
		return
	}
	model := msg.Meta.Provider + "/" + msg.Meta.Model
	u := msg.Meta.Usage
	for _, t := range []struct {
		kind string
		n    int
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cache_read", u.CacheReadTokens}, {"cache_write", u.CacheWriteTokens},
		{"reasoning", u.ReasoningTokens}} {
		if t.n > 0 {
			m.tokens.WithLabelValues(route, model, t.kind).Add(float64(t.n))
		}
	}
}

// UsageRecorded counts one attempt the usage ledger recorded: its
// outcome, tokens and cost (priced false for a model without a price).
func (m *Metrics) UsageRecorded(model, origin, outcome string, u llm.Usage, usd float64, priced bool) {
	m.usageMu.Lock()
	defer m.usageMu.Unlock()
	s := m.usageSeriesLocked(model, origin)
	calls := s.calls[outcome]
	if calls == nil {
		calls = m.usageCalls.WithLabelValues(model, origin, outcome)
		s.calls[outcome] = calls
	}
	calls.Inc()
	for i, n := range [len(tokenKinds)]int{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if n <= 0 {
			continue
		}
		if s.tokens[i] == nil {
			s.tokens[i] = m.usageTokens.WithLabelValues(model, origin, tokenKinds[i])
		}
		s.tokens[i].Add(float64(n))
	}
	if !priced {
		if s.unpriced == nil {
			s.unpriced = m.usageUnpriced.WithLabelValues(model, origin)
		}
		s.unpriced.Inc()
		return
	}
	if s.cost == nil {
		s.cost = m.usageCost.WithLabelValues(model, origin)
	}
	s.cost.Add(usd)
}

// tokenKinds are the kind labels of usage_tokens_total, in the order
// UsageRecorded reads llm.Usage.
var tokenKinds = [...]string{"input", "output", "cache_read", "cache_write", "reasoning"}

// usageSeries are the usage counters of one model and origin, looked up
// once: UsageRecorded runs for every model call, and a label lookup hashes
// and checks every label value. A series is made on its first use, as
// WithLabelValues would, so none shows at 0 that was never counted.
type usageSeries struct {
	calls    map[string]prometheus.Counter // by outcome
	tokens   [len(tokenKinds)]prometheus.Counter
	cost     prometheus.Counter
	unpriced prometheus.Counter
}

func (m *Metrics) usageSeriesLocked(model, origin string) *usageSeries {
	k := [2]string{model, origin}
	s := m.usage[k]
	if s == nil {
		s = &usageSeries{calls: map[string]prometheus.Counter{}}
		m.usage[k] = s
	}
	return s
}

// ToolCall counts a tool call (the tool registry's Observer).
func (m *Metrics) ToolCall(name string, isError bool, elapsed time.Duration) {
	outcome := "ok"
	if isError {
		outcome = "error"
	}
	m.toolCalls.WithLabelValues(name, outcome).Inc()
	m.toolSeconds.WithLabelValues(name).Observe(elapsed.Seconds())
}

// PlatformCall counts a chat platform call (the channel manager's Observer).
func (m *Metrics) PlatformCall(channel, op, outcome string) {
	m.platform.WithLabelValues(channel, op, outcome).Inc()
}

// Reply counts what became of one final answer or message (the channel
// manager's Observer).
func (m *Metrics) Reply(channel, kind, outcome string) {
	m.replies.WithLabelValues(channel, kind, outcome).Inc()
}

// APIRequest counts one request to the OpenAI-compatible API.
func (m *Metrics) APIRequest(key, outcome string, elapsed time.Duration) {
	m.apiCalls.WithLabelValues(key, outcome).Inc()
	m.apiSeconds.WithLabelValues(key).Observe(elapsed.Seconds())
}

// WatchQueues exports the bus queue depths as nanobot_bus_queue_depth.
func (m *Metrics) WatchQueues(inbound, outbound func() int) {
	for queue, fn := range map[string]func() int{"inbound": inbound, "outbound": outbound} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "bus_queue_depth",
			Help:        "Messages waiting in a bus queue: inbound (channels to agent) or outbound (agent to channels).",
			ConstLabels: prometheus.Labels{"queue": queue},
		}, func() float64 { return float64(fn()) }))
	}
}

// WatchSessions exports how many sessions are loaded as
// nanobot_sessions_cached, and what they weigh as
// nanobot_sessions_cached_bytes.
func (m *Metrics) WatchSessions(cached func() int, weight func() int64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "sessions_cached",
		Help: "Sessions loaded in memory (bounded by agents.session_cache).",
	}, func() float64 { return float64(cached()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "sessions_cached_bytes",
		Help: "Weight of the sessions loaded in memory: their files' bytes plus a per-message overhead (bounded by agents.session_cache_bytes).",
	}, func() float64 { return float64(weight()) }))
}

// WatchChannel exports a channel's health as nanobot_channel_up (1 when
// healthy returns nil).
func (m *Metrics) WatchChannel(name string, healthy func() error) {
	m.watchUp("channel_up", "1 while the channel is connected to its platform, else 0.", "channel", name, healthy)
}

// WatchProvider exports a model provider's state as nanobot_provider_up
// (1 while problem returns nil: it has a key, and the last probe found it
// reachable and the key accepted). The reason is on /readyz and in status.
func (m *Metrics) WatchProvider(name string, problem func() error) {
	m.watchUp("provider_up", "1 while the model provider has a key and its last probe succeeded, else 0 (the reason: /readyz).",
		"provider", name, problem)
}

// watchUp registers a 0/1 gauge, labelled with one part's name, that is 1
// while problem returns nil.
func (m *Metrics) watchUp(metric, help, label, name string, problem func() error) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: metric, Help: help,
		ConstLabels: prometheus.Labels{label: name},
	}, func() float64 {
		if problem() != nil {
			return 0
		}
		return 1
	}))
}

// WatchNATS exports the NATS bus of a scaled-out process (docs/scale-out.md):
// nanobot_nats_up (1 while connected and set up) and
// nanobot_nats_held_messages (taken from a stream, not acknowledged yet),
// both labelled with the process's role (channels, agent or all).
func (m *Metrics) WatchNATS(role string, held func() int, healthy func() error) {
	labels := prometheus.Labels{"role": role}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "nats_up",
		Help:        "1 while the NATS bus is connected and its streams are set up, else 0.",
		ConstLabels: labels,
	}, func() float64 {
		if healthy() != nil {
			return 0
		}
		return 1
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "nats_held_messages",
		Help:        "Messages this process took from a NATS stream and has not acknowledged yet (turns in flight, replies being delivered).",
		ConstLabels: labels,
	}, func() float64 { return float64(held()) }))
}

// WatchLeader exports nanobot_scheduler_leader: 1 while this process holds
// the lease that makes it run cron and the heartbeat among split processes
// (docs/scale-out.md), else 0.
func (m *Metrics) WatchLeader(leading func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "scheduler_leader",
		Help: "1 while this process is the elected one that runs cron and the heartbeat, else 0.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	}))
}

// factory makes and registers the vectors with the namespace.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}
