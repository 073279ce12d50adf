package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// RouteSpec is a named route as configured under routes.<name>.
type RouteSpec struct {
	// Model is "provider/model".
	Model         string
	Fallbacks     []string
	ContextWindow int
	MaxTokens     int
}

// Route is a resolved route: which provider to call with which model id.
type Route struct {
	// Name is what was asked for: a route name or "provider/model".
	Name          string
	Provider      string
	Model         string
	Fallbacks     []string
	ContextWindow int
	MaxTokens     int
}

// Options configure a Router. The daemon fills them from the configuration:
// agents.model, agents.fallbacks, routes, agents.context_window and
// providers.<name>.max_retries.
type Options struct {
	// Default is the route used when a session has none (agents.model).
	Default string
	// DefaultFallbacks apply to Default and to any "provider/model" string
	// without a route of its own (agents.fallbacks).
	DefaultFallbacks []string
	// Routes are the named routes.
	Routes map[string]RouteSpec
	// ContextWindow is the context window of models the built-in table does
	// not know, when their route sets none (agents.context_window); 0 means
	// a conservative 32k.
	ContextWindow int
	// MaxRetries is how many times a retryable failure is retried on the
	// same route, per provider name (providers.<name>.max_retries);
	// providers without an entry get Retry.DefaultRetries.
	MaxRetries map[string]int
	Retry      RetryPolicy
	Breaker    BreakerPolicy
	// Clock is the circuit breakers' time and the backoff's timer
	// [clock.System]; tests inject a fake so that nothing really waits.
	Clock clock.Clock
	// Jitter draws a backoff wait from [0, d]; uniform random when nil.
	Jitter func(d time.Duration) time.Duration
	// Usage records every attempt, answered, retried or failed, with the
	// caller the context carries (usage.WithCall); nil records nothing.
	Usage usage.Recorder
	// Budget admits a call its context has not admitted yet (a turn admits
	// itself once, so its later calls run on); nil admits every call.
	Budget Admitter
}

// Admitter decides whether a new model call may run (*usage.Budget).
type Admitter interface {
	Admit(ctx context.Context) (context.Context, usage.Decision)
}

// ErrUnknownRoute is returned for a route that names neither a configured
// route nor a configured provider; the caller should tell the user which
// routes exist.
var ErrUnknownRoute = errors.New("unknown route")

// Router resolves routes and runs model calls on the configured providers:
// a retryable failure is retried on the same route with backoff, an
// unusable answer (empty, or a malformed call: llm.CheckAnswer) once
// without waiting (not when the provider's max_retries is 0), then the
// route's fallbacks are tried in order; a route that keeps failing is
// skipped for a while by its circuit breaker. It is safe for concurrent use.
type Router struct {
	providers map[string]Streamer
	opts      Options
	log       *zap.Logger

	mu       sync.Mutex
	breakers map[string]*breaker // by provider/model
}

// NewRouter returns a router over the given providers (keyed by their
// configured name). It does no I/O.
func NewRouter(providers map[string]Streamer, opts Options, log *zap.Logger) *Router {
	opts.Retry = opts.Retry.withDefaults()
	opts.Breaker = opts.Breaker.withDefaults()
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Jitter == nil {
		opts.Jitter = fullJitter
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Router{providers: providers, opts: opts, log: log, breakers: map[string]*breaker{}}
}

// Default is the default route's name.
func (r *Router) Default() string { return r.opts.Default }

// Routes lists the named routes and the default, sorted, for /model.
func (r *Router) Routes() []string {
	names := make([]string, 0, len(r.opts.Routes)+1)
	for n := range r.opts.Routes {
		names = append(names, n)
	}
	if _, named := r.opts.Routes[r.opts.Default]; !named && r.opts.Default != "" {
		names = append(names, r.opts.Default)
	}
	slices.Sort(names)
	return names
}

// Resolve turns a route name ("" for the default) into a Route. Its
// context window is the route's context_window when set, else the known
// window of the model, else Options.ContextWindow.
func (r *Router) Resolve(name string) (Route, error) {
	if name == "" {
		name = r.opts.Default
	}
	if spec, ok := r.opts.Routes[name]; ok {
		rt, err := r.resolveModel(name, spec.Model)
		if err != nil {
			return Route{}, err
		}
		rt.Fallbacks = spec.Fallbacks
		rt.MaxTokens = spec.MaxTokens
		rt.ContextWindow = spec.ContextWindow
		if rt.ContextWindow <= 0 {
			rt.ContextWindow = r.contextWindow(rt.Model)
		}
		return rt, nil
	}
	rt, err := r.resolveModel(name, name)
	if err != nil {
		return Route{}, err
	}
	rt.Fallbacks = r.opts.DefaultFallbacks
	rt.ContextWindow = r.contextWindow(rt.Model)
	return rt, nil
}

func (r *Router) contextWindow(model string) int {
	if n, ok := KnownContextWindow(model); ok {
		return n
	}
	if r.opts.ContextWindow > 0 {
		return r.opts.ContextWindow
	}
	return defaultContextWindow
}

func (r *Router) resolveModel(name, model string) (Route, error) {
	prov, id, ok := strings.Cut(model, "/")
	if !ok || prov == "" || id == "" {
		return Route{}, fmt.Errorf("%w %q: want provider/model or a name under routes", ErrUnknownRoute, name)
	}
	if _, ok := r.providers[prov]; !ok {
		return Route{}, fmt.Errorf("%w %q: provider %q is not configured", ErrUnknownRoute, name, prov)
	}
	return Route{Name: name, Provider: prov, Model: id}, nil
}

// ContextWindow is the resolved route's context window in tokens.
func (r *Router) ContextWindow(route string) int {
	rt, err := r.Resolve(route)
	if err != nil {
		return defaultContextWindow
	}
	return rt.ContextWindow
}

// Check reports whether route resolves to a configured provider.
func (r *Router) Check(route string) error {
	_, err := r.Resolve(route)
	return err
}

// Complete runs req on the route and returns the accumulated assistant
// message, with Meta recording the route asked for and the provider, api
// and model that answered (docs/routing.md#what-the-caller-sees). A retryable
// failure is retried on the route, then each fallback is tried in order; an
// authentication or validation error ends the call at once. onDelta, if not
// nil, sees every delta as it arrives (for streaming drafts); a DeltaStart
// tells it a new attempt began and any draft so far is void. A failed call
// returns an error and no message, so nothing half-made is ever persisted
// (docs/routing.md#what-happens-when-a-call-fails).
func (r *Router) Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
	log := logging.From(ctx, r.log)
	if r.opts.Budget != nil {
		var d usage.Decision
		ctx, d = r.opts.Budget.Admit(ctx)
		if d.Verdict == usage.Stop {
			return llm.Message{}, d.Err()
		}
	}
	// A budget at its limit may move the work to a cheaper route
	// (budget.reroute), for all its calls.
	if c, _ := usage.CallFrom(ctx); c.Reroute != "" && c.Reroute != route {
		log.Info("budget reached, on the cheaper route", zap.String("route", route), zap.String("cheaper", c.Reroute))
		route = c.Reroute
	}
	rt, err := r.Resolve(route)
	if err != nil {
		return llm.Message{}, err
	}
	var errs []error
	var last *usage.Record // the failed last attempt of the previous candidate
	for i, cand := range r.chain(log, rt) {
		if i > 0 {
			prev := errs[len(errs)-1]
			log.Warn("falling back", zap.String("route", rt.Name), zap.String("fallback", cand.Name),
				zap.String("failure", string(llm.Classify(prev).Kind)), zap.Error(prev))
			r.record(ctx, last, usage.OutcomeRetried)
		}
		msg, lastAttempt, err := r.onRoute(ctx, rt.Name, cand, req, onDelta)
		if err == nil {
			msg.Meta.Route = rt.Name
			return msg, nil
		}
		last = lastAttempt
		errs = append(errs, err)
		if ctx.Err() != nil || !llm.Classify(err).Fallback {
			break
		}
	}
	r.record(ctx, last, usage.OutcomeFailed)
	if len(errs) == 1 {
		return llm.Message{}, errs[0]
	}
	return llm.Message{}, fmt.Errorf("every route failed: %w", errors.Join(errs...))
}

// chain is the route followed by its resolvable fallbacks, each
// provider/model once. A fallback that does not resolve is logged and
// skipped (config validation reports it at start).
func (r *Router) chain(log *zap.Logger, rt Route) []Route {
	out := []Route{rt}
	seen := map[string]bool{rt.Provider + "/" + rt.Model: true}
	for _, name := range rt.Fallbacks {
		fb, err := r.Resolve(name)
		if err != nil {
			log.Warn("fallback does not resolve", zap.String("route", rt.Name), zap.String("fallback", name), zap.Error(err))
			continue
		}
		if key := fb.Provider + "/" + fb.Model; !seen[key] {
			seen[key] = true
			out = append(out, fb)
		}
	}
	return out
}

// onRoute calls one route, retrying retryable failures with backoff. The
// route's breaker sees the outcome of the whole call: one failure when the
// retries are used up (or a Retry-After is too long to wait for). A
// half-open probe gets a single attempt.
//
// Every attempt is recorded (Options.Usage): an answer as ok, a failure
// asked again as retried. The last failed attempt is returned unrecorded
// (nil when no attempt was made): only Complete knows whether a fallback
// follows it.
func (r *Router) onRoute(ctx context.Context, asked string, rt Route, req llm.Request, onDelta func(llm.Delta)) (llm.Message, *usage.Record, error) {
	b := r.breaker(rt)
	log := logging.From(ctx, r.log)
	label := rt.Provider + "/" + rt.Model
	probe, err := b.allow(r.opts.Clock.Now(), label)
	if err != nil {
		return llm.Message{}, nil, err
	}
	retries, ok := r.opts.MaxRetries[rt.Provider]
	if !ok {
		retries = r.opts.Retry.DefaultRetries
	}
	if probe {
		retries = 0
	}
	req = fit(rt, req)
	for attempt := 1; ; attempt++ {
		msg, rec, err := r.attempt(ctx, asked, rt, req, onDelta)
		if err == nil {
			b.success()
			r.record(ctx, &rec, usage.OutcomeOK)
			return msg, nil, nil
		}
		if ctx.Err() != nil {
			b.release()
			return llm.Message{}, &rec, err
		}
		// What the failure allows: llm.Policies.
		f := llm.Classify(err)
		switch {
		case f.Retry == llm.RetryOnce && attempt <= min(retries, 1):
			record(b, f.Breaker, r.opts.Clock.Now(), err)
			log.Warn("unusable model answer, asking once more", zap.String("route", label), zap.String("failure", string(f.Kind)), zap.Error(err))
			r.record(ctx, &rec, usage.OutcomeRetried)
			continue
		case f.Retry != llm.RetryBackoff:
			record(b, f.Breaker, r.opts.Clock.Now(), err)
			return llm.Message{}, &rec, err
		}
		wait, ok := r.wait(attempt, f)
		if attempt > retries || !ok {
			if !ok {
				log.Warn("retry-after too long, not waiting", zap.String("route", label), zap.Duration("retry_after", wait), zap.Error(err))
			}
			if record(b, f.Breaker, r.opts.Clock.Now(), err) {
				log.Warn("circuit opened", zap.String("route", label), zap.Duration("cooldown", r.opts.Breaker.Cooldown),
					zap.String("failure", string(f.Kind)), zap.Error(err))
			}
			return llm.Message{}, &rec, err
		}
		log.Warn("model call failed, retrying", zap.String("route", label), zap.String("failure", string(f.Kind)),
			zap.Int("attempt", attempt), zap.Duration("wait", wait), zap.Error(err))
		r.record(ctx, &rec, usage.OutcomeRetried)
		if err := clock.Sleep(ctx, r.opts.Clock, wait); err != nil {
			b.release()
			return llm.Message{}, nil, err
		}
	}
}

// fit gives req the messages for rt's limits when the caller asked to fit
// them (llm.Request.Fit): once per route, after its breaker let the call
// through, so a route skipped costs no projection.
func fit(rt Route, req llm.Request) llm.Request {
	if req.Fit == nil {
		return req
	}
	limits := llm.Limits{ContextWindow: rt.ContextWindow, MaxTokens: req.MaxTokens}
	if rt.MaxTokens > 0 {
		limits.MaxTokens = rt.MaxTokens
	}
	req.Messages = req.Fit(limits)
	req.Fit = nil
	return req
}

// record tells the breaker what a call that ended with err says about the
// route (llm.Policy.Breaker), and reports whether the circuit opened.
func record(b *breaker, s llm.Signal, now time.Time, err error) (opened bool) {
	switch s {
	case llm.SignalDown:
		return b.fail(now, err)
	case llm.SignalUp:
		b.success() // the provider answered; it is up
	default:
		b.release() // proves nothing
	}
	return false
}

// wait is how long to wait before retry number n after failure f: the
// server's Retry-After exactly, if it asked for one no longer than MaxWait
// (ok is false for a longer one), else a jittered exponential backoff.
func (r *Router) wait(n int, f llm.Failure) (time.Duration, bool) {
	if f.RetryAfter > 0 {
		return f.RetryAfter, f.RetryAfter <= r.opts.Retry.MaxWait
	}
	return r.opts.Jitter(r.opts.Retry.backoff(n)), true
}

func (r *Router) breaker(rt Route) *breaker {
	key := rt.Provider + "/" + rt.Model
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.breakers[key]
	if !ok {
		b = &breaker{policy: r.opts.Breaker}
		r.breakers[key] = b
	}
	return b
}

// attempt streams one call on one route. Its record holds the tokens the
// stream reported, also when it failed (a provider bills what it served);
// an answer with no usage at all gets an estimate, marked.
func (r *Router) attempt(ctx context.Context, asked string, rt Route, req llm.Request, onDelta func(llm.Delta)) (llm.Message, usage.Record, error) {
	rec := usage.Record{Time: r.opts.Clock.Now(), Route: asked, Provider: rt.Provider, Model: rt.Model}
	p := r.providers[rt.Provider]
	req.Model = rt.Model
	if rt.MaxTokens > 0 {
		req.MaxTokens = rt.MaxTokens
	}
	var acc llm.Accumulator
	for d := range p.Stream(ctx, req) {
		if err := acc.Add(d); err != nil {
			break
		}
		if onDelta != nil {
			onDelta(d)
		}
	}
	msg, err := acc.Message()
	rec.Tokens = acc.Usage()
	if err == nil {
		if usage.NeedsEstimate(rec.Tokens) {
			rec.Tokens, rec.Estimated = usage.Estimate(req, msg), true
		}
		// An empty answer or a malformed call is a failure the next try or
		// route may not repeat
		// (docs/reliability.md#every-turn-ends-with-something-to-read); a cut
		// or a refusal is an answer.
		err = req.Check(msg)
	}
	if err != nil {
		return llm.Message{}, rec, fmt.Errorf("route %s (%s/%s): %w", rt.Name, rt.Provider, rt.Model, err)
	}
	if msg.Meta.Provider == "" {
		msg.Meta.Provider = rt.Provider
	}
	if msg.Meta.Model == "" {
		msg.Meta.Model = rt.Model
	}
	return msg, rec, nil
}

// record puts an attempt in the ledger with the caller ctx carries. A
// ledger that cannot write is logged, never fails the call: the answer
// matters more than its bookkeeping.
func (r *Router) record(ctx context.Context, rec *usage.Record, outcome usage.Outcome) {
	if r.opts.Usage == nil || rec == nil {
		return
	}
	c, _ := usage.CallFrom(ctx)
	rec.Origin, rec.Session, rec.Chat, rec.Outcome = c.Origin, c.Session, c.Chat, outcome
	if err := r.opts.Usage.Record(ctx, *rec); err != nil {
		logging.From(ctx, r.log).Warn("cannot record a model call's usage", zap.String("model", rec.ModelKey()), zap.Error(err))
	}
}
