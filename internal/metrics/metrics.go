// Package metrics holds nanobot's Prometheus metrics
// (docs/operations.md#metrics): one set of the counters and histograms the
// daemon feeds through small observer methods (turns, model calls, tools,
// platform calls), gauges read at scrape time (queue depth, cached sessions,
// channel health), build info and the Go runtime and process metrics. Its
// http.Handler serves /metrics in the Prometheus text format.
//
// The set is VictoriaMetrics/metrics rather than the Prometheus client: the
// same text format at a tenth of the size (the Prometheus client links
// protobuf, 2.3 MB of the binary; docs/BENCHMARKS.md, binary size).
//
// It imports only llm (for token usage and error classification) and that
// library: the agent, tools and channels declare the observer interfaces
// they call, and the daemon plugs this package into them.
package metrics

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

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
	set *vm.Set
	// meta are the families' HELP and TYPE lines, by name.
	metaMu sync.Mutex
	meta   map[string]family

	turns       *vec[*vm.Counter]
	turnSeconds *vec[*vm.PrometheusHistogram]
	llmCalls    *vec[*vm.Counter]
	llmSeconds  *vec[*vm.PrometheusHistogram]
	tokens      *vec[*vm.Counter]
	toolCalls   *vec[*vm.Counter]
	toolSeconds *vec[*vm.PrometheusHistogram]
	platform    *vec[*vm.Counter]
	replies     *vec[*vm.Counter]
	apiCalls    *vec[*vm.Counter]
	apiSeconds  *vec[*vm.PrometheusHistogram]
	// The usage ledger's figures (UsageRecorded): every attempt, by model
	// and origin.
	usageCalls    *vec[*vm.Counter]
	usageTokens   *vec[*vm.Counter]
	usageCost     *vec[*vm.FloatCounter]
	usageUnpriced *vec[*vm.Counter]
	usageMu       sync.Mutex
	usage         map[[2]string]*usageSeries // by model and origin
}

// family is what the text format says of a metric family besides its
// samples.
type family struct{ typ, help string }

// New returns the metrics with every family declared. It does no I/O: the
// process metrics read /proc only when scraped.
func New(info BuildInfo) *Metrics {
	m := &Metrics{set: vm.NewSet(), meta: map[string]family{}, usage: map[[2]string]*usageSeries{}}
	f := factory{m}
	m.turns = f.counter("turns_total",
		"Turns finished, by outcome: answered, failed, stopped (/stop) or interrupted (shutdown).", "outcome")
	m.turnSeconds = f.histogram("turn_duration_seconds",
		"Time from a turn's start to its last reply, by outcome.", turnBuckets, "outcome")
	m.llmCalls = f.counter("llm_calls_total",
		"Model calls (retries and fallbacks included in one call), by route asked for and outcome: "+
			"ok, cancelled, rate_limited, auth, quota, unavailable, rejected or error.", "route", "outcome")
	m.llmSeconds = f.histogram("llm_call_duration_seconds",
		"Duration of a model call, retries and fallbacks included, by route.", llmBuckets, "route")
	m.tokens = f.counter("llm_tokens_total",
		"Tokens used by successful model calls, by route asked for, provider/model that answered and kind: "+
			"input, output, cache_read, cache_write or reasoning (the part of output spent thinking).", "route", "model", "kind")
	m.toolCalls = f.counter("tool_calls_total",
		"Tool calls, by tool and outcome (ok or error); calls of tools that do not exist count as tool \"unknown\".",
		"tool", "outcome")
	m.toolSeconds = f.histogram("tool_call_duration_seconds", "Duration of a tool call, by tool.", toolBuckets, "tool")
	m.platform = f.counter("channel_calls_total",
		"Calls to a chat platform (each attempt), by channel, operation (send, edit, delete, send media, typing) "+
			"and outcome: ok, not_modified, rate_limited, bad_markup, unknown_outcome, permanent, canceled or transient.",
		"channel", "op", "outcome")
	m.replies = f.counter("replies_total",
		"Final answers and standalone messages the channels took from the agent, by channel, kind (final or message) "+
			"and outcome: delivered (reached the chat, page or API client), failed (given up on: refused, retries "+
			"exhausted) or cut (shutdown cut it short; the question is redelivered). Compare with turns_total{outcome=\"answered\"}, "+
			"which counts answers produced.", "channel", "kind", "outcome")
	m.apiCalls = f.counter("api_requests_total",
		"Requests to the OpenAI-compatible API, by key name (\"unknown\" before authentication) and outcome: "+
			"ok, failed, client_closed, timeout, unavailable, unauthorized, rate_limited, busy, bad_request, not_found or too_large.",
		"key", "outcome")
	m.apiSeconds = f.histogram("api_request_duration_seconds",
		"Time from an API request's arrival to its answer (or refusal), by key name.", turnBuckets, "key")
	m.usageCalls = f.counter("usage_calls_total",
		"Model call attempts in the usage ledger (docs/usage.md), by provider/model, origin (turn, api, heartbeat, cron, "+
			"consolidation, subagent, transcription) and outcome (ok, retried, failed).", "model", "origin", "outcome")
	m.usageTokens = f.counter("usage_tokens_total",
		"Tokens in the usage ledger, every attempt, by provider/model, origin and kind: input (not from the cache), "+
			"output, cache_read, cache_write or reasoning (the part of output spent thinking).", "model", "origin", "kind")
	m.usageCost = f.floatCounter("usage_cost_usd_total",
		"What the priced attempts in the usage ledger cost, in USD, by provider/model and origin; unpriced models "+
			"count in nanobot_usage_unpriced_calls_total instead.", "model", "origin")
	m.usageUnpriced = f.counter("usage_unpriced_calls_total",
		"Attempts of models without a price (prices:), by provider/model and origin.", "model", "origin")
	m.gauge("build_info", "Always 1; the labels say which nanobot is running.",
		map[string]string{"version": info.Version, "goversion": info.GoVersion}, func() float64 { return 1 })
	return m
}

// Handler serves the metrics in the Prometheus text format: nanobot's
// families with their HELP and TYPE, then the Go runtime's and the
// process's (go_*, process_*).
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var samples, out bytes.Buffer
		m.set.WritePrometheus(&samples)
		m.annotate(&out, samples.Bytes())
		vm.WriteProcessMetrics(&out)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(out.Bytes())
	})
}

// annotate copies the samples (sorted by name, so a family's are
// together) to out, each family's preceded by its HELP and TYPE lines.
func (m *Metrics) annotate(out *bytes.Buffer, samples []byte) {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(samples))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name := line[:strings.IndexAny(line+" ", "{ ")]
		fam, meta, ok := name, family{}, false
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suffix); cut {
				if meta, ok = m.meta[base]; ok && (suffix == "" || meta.typ == "histogram") {
					fam = base
					break
				}
				ok = false
			}
		}
		if ok && fam != last {
			out.WriteString("# HELP " + fam + " " + escapeHelp(meta.help) + "\n# TYPE " + fam + " " + meta.typ + "\n")
			last = fam
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
}

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// TurnDone counts a finished turn (the agent's Observer).
func (m *Metrics) TurnDone(outcome string, elapsed time.Duration) {
	m.turns.with(outcome).Inc()
	m.turnSeconds.with(outcome).Update(elapsed.Seconds())
}

// ModelCall counts one model call on route ("" is reported as "default"):
// its outcome (llm.Policy.Metric), duration and, when it succeeded, the tokens
// of msg, labelled with the provider/model that answered.
func (m *Metrics) ModelCall(route, outcome string, elapsed time.Duration, msg llm.Message) {
	if route == "" {
		route = "default"
	}
	m.llmCalls.with(route, outcome).Inc()
	m.llmSeconds.with(route).Update(elapsed.Seconds())
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
			m.tokens.with(route, model, t.kind).Add(t.n)
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
		calls = m.usageCalls.with(model, origin, outcome)
		s.calls[outcome] = calls
	}
	calls.Inc()
	for i, n := range [len(tokenKinds)]int{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if n <= 0 {
			continue
		}
		if s.tokens[i] == nil {
			s.tokens[i] = m.usageTokens.with(model, origin, tokenKinds[i])
		}
		s.tokens[i].Add(n)
	}
	if !priced {
		if s.unpriced == nil {
			s.unpriced = m.usageUnpriced.with(model, origin)
		}
		s.unpriced.Inc()
		return
	}
	if s.cost == nil {
		s.cost = m.usageCost.with(model, origin)
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
	calls    map[string]*vm.Counter // by outcome
	tokens   [len(tokenKinds)]*vm.Counter
	cost     *vm.FloatCounter
	unpriced *vm.Counter
}

func (m *Metrics) usageSeriesLocked(model, origin string) *usageSeries {
	k := [2]string{model, origin}
	s := m.usage[k]
	if s == nil {
		s = &usageSeries{calls: map[string]*vm.Counter{}}
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
	m.toolCalls.with(name, outcome).Inc()
	m.toolSeconds.with(name).Update(elapsed.Seconds())
}

// PlatformCall counts a chat platform call (the channel manager's Observer).
func (m *Metrics) PlatformCall(channel, op, outcome string) {
	m.platform.with(channel, op, outcome).Inc()
}

// Reply counts what became of one final answer or message (the channel
// manager's Observer).
func (m *Metrics) Reply(channel, kind, outcome string) {
	m.replies.with(channel, kind, outcome).Inc()
}

// APIRequest counts one request to the OpenAI-compatible API.
func (m *Metrics) APIRequest(key, outcome string, elapsed time.Duration) {
	m.apiCalls.with(key, outcome).Inc()
	m.apiSeconds.with(key).Update(elapsed.Seconds())
}

// WatchQueues exports the bus queue depths as nanobot_bus_queue_depth.
func (m *Metrics) WatchQueues(inbound, outbound func() int) {
	for _, q := range []struct {
		name string
		fn   func() int
	}{{"inbound", inbound}, {"outbound", outbound}} {
		m.gauge("bus_queue_depth", "Messages waiting in a bus queue: inbound (channels to agent) or outbound (agent to channels).",
			map[string]string{"queue": q.name}, func() float64 { return float64(q.fn()) })
	}
}

// WatchSessions exports how many sessions are loaded as
// nanobot_sessions_cached, and what they weigh as
// nanobot_sessions_cached_bytes.
func (m *Metrics) WatchSessions(cached func() int, weight func() int64) {
	m.gauge("sessions_cached", "Sessions loaded in memory (bounded by agents.session_cache).", nil,
		func() float64 { return float64(cached()) })
	m.gauge("sessions_cached_bytes",
		"Weight of the sessions loaded in memory: their files' bytes plus a per-message overhead (bounded by agents.session_cache_bytes).",
		nil, func() float64 { return float64(weight()) })
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
	m.gauge(metric, help, map[string]string{label: name}, func() float64 { return up(problem() == nil) })
}

func up(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// WatchNATS exports the NATS bus of a scaled-out process (docs/scale-out.md):
// nanobot_nats_up (1 while connected and set up) and
// nanobot_nats_held_messages (taken from a stream, not acknowledged yet),
// both labelled with the process's role (channels, agent or all).
func (m *Metrics) WatchNATS(role string, held func() int, healthy func() error) {
	labels := map[string]string{"role": role}
	m.gauge("nats_up", "1 while the NATS bus is connected and its streams are set up, else 0.", labels,
		func() float64 { return up(healthy() == nil) })
	m.gauge("nats_held_messages",
		"Messages this process took from a NATS stream and has not acknowledged yet (turns in flight, replies being delivered).",
		labels, func() float64 { return float64(held()) })
}

// WatchLeader exports nanobot_scheduler_leader: 1 while this process holds
// the lease that makes it run cron and the heartbeat among split processes
// (docs/scale-out.md), else 0.
func (m *Metrics) WatchLeader(leading func() bool) {
	m.gauge("scheduler_leader", "1 while this process is the elected one that runs cron and the heartbeat, else 0.", nil,
		func() float64 { return up(leading()) })
}

// gauge registers a gauge read at scrape time; like any family registered
// twice with the same labels, it panics (a wiring mistake).
func (m *Metrics) gauge(name, help string, labels map[string]string, fn func() float64) {
	m.declare(name, "gauge", help)
	names := slices.Sorted(maps.Keys(labels))
	values := make([]string, len(names))
	for i, k := range names {
		values[i] = labels[k]
	}
	m.set.NewGauge(series(namespace+"_"+name, names, values), fn)
}

func (m *Metrics) declare(name, typ, help string) {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	m.meta[namespace+"_"+name] = family{typ: typ, help: help}
}

// factory declares the families with the namespace.
type factory struct{ m *Metrics }

func (f factory) counter(name, help string, labels ...string) *vec[*vm.Counter] {
	f.m.declare(name, "counter", help)
	return newVec(namespace+"_"+name, labels, f.m.set.GetOrCreateCounter)
}

func (f factory) floatCounter(name, help string, labels ...string) *vec[*vm.FloatCounter] {
	f.m.declare(name, "counter", help)
	return newVec(namespace+"_"+name, labels, f.m.set.GetOrCreateFloatCounter)
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *vec[*vm.PrometheusHistogram] {
	f.m.declare(name, "histogram", help)
	return newVec(namespace+"_"+name, labels, func(s string) *vm.PrometheusHistogram {
		return f.m.set.GetOrCreatePrometheusHistogramExt(s, buckets)
	})
}

// vec is a family with labels: one series per set of label values, made on
// its first use.
type vec[T any] struct {
	name      string
	labels    []string // sorted, as the text format writes them
	order     []int    // order[i]: which of with's values is labels[i]
	newSeries func(series string) T

	mu     sync.Mutex
	series map[string]T // by the values joined
}

func newVec[T any](name string, labels []string, newSeries func(string) T) *vec[T] {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	sorted := make([]string, len(labels))
	for i, j := range order {
		sorted[i] = labels[j]
	}
	return &vec[T]{name: name, labels: sorted, order: order, newSeries: newSeries, series: map[string]T{}}
}

// with returns the series of values, given in the order the labels were
// declared.
func (v *vec[T]) with(values ...string) T {
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.series[key]
	if !ok {
		sorted := make([]string, len(values))
		for i, j := range v.order {
			sorted[i] = values[j]
		}
		s = v.newSeries(series(v.name, v.labels, sorted))
		v.series[key] = s
	}
	return s
}

// series is a sample's name with its labels: name{a="1",b="2"}.
func series(name string, labels, values []string) string {
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name)
	for i, l := range labels {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(l + `="` + labelEscaper.Replace(values[i]) + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

// labelEscaper escapes a label value as the text format wants it.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
