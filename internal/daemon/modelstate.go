package daemon

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Probe backoff for a provider found down at start (unreachable, refused):
// it is asked again, cheaply (its model list), first after probeRetryMin,
// doubling up to probeRetryMax, until it answers. A refused key stays
// refused until the key changes; an unreachable server may come back.
const (
	probeRetryMin = 10 * time.Second
	probeRetryMax = 5 * time.Minute
	probeTimeout  = 15 * time.Second
)

// providerSlot is one configured provider as the router sees it: the
// adapter behind a lock, so the setup page can put in one built from a new
// key while calls run (docs/web.md#setup), and what is known to be wrong
// with it before or between calls, for /readyz, status, metrics and the
// page. A provider without a key answers every call at once with an auth
// error naming the missing variable, instead of sending a request that can
// only be refused.
type providerSlot struct {
	name string
	hc   *http.Client
	log  *zap.Logger

	mu  sync.RWMutex
	pc  config.ProviderConfig
	p   modelProvider
	gen int // counts replacements: a probe of an older adapter says nothing
	// problem says why it cannot serve ("" while nothing is known to be
	// wrong); missing is true when the problem is a missing key, which no
	// retry cures.
	problem string
	missing bool
}

var _ interface {
	Stream(context.Context, llm.Request) iter.Seq[llm.Delta]
} = (*providerSlot)(nil)

// newProviderSlot builds the adapter of providers.<name>; problem is what
// config already knows is wrong (a missing key), or "".
func newProviderSlot(name string, pc config.ProviderConfig, problem string, hc *http.Client, log *zap.Logger) (*providerSlot, error) {
	p, err := newProvider(name, pc, hc, log)
	if err != nil {
		return nil, err
	}
	return &providerSlot{name: name, hc: hc, log: log, pc: pc, p: p, problem: problem, missing: problem != ""}, nil
}

// Stream streams through the current adapter, or fails at once when the
// key is missing.
func (s *providerSlot) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	s.mu.RLock()
	p, missing, problem := s.p, s.missing, s.problem
	s.mu.RUnlock()
	if missing {
		return func(yield func(llm.Delta) bool) {
			if !yield(llm.Delta{Seq: 1, Kind: llm.DeltaStart, Meta: &llm.Meta{Provider: s.name, Model: req.Model}}) {
				return
			}
			yield(llm.Delta{Seq: 2, Kind: llm.DeltaError, Err: &llm.APIError{Provider: s.name, Status: http.StatusUnauthorized, Message: problem}})
		}
	}
	return p.Stream(ctx, req)
}

// Problem is why the provider cannot serve, or nil.
func (s *providerSlot) Problem() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.problem == "" {
		return nil
	}
	return errors.New(s.problem)
}

// Missing reports whether the provider has no key.
func (s *providerSlot) Missing() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.missing
}

// probe lists the provider's models (the cheapest call that proves the key)
// and records what it says: down when the key is refused or the server is
// unreachable; a server without a model list (404) is not known to be down.
// It reports whether the provider is now up.
func (s *providerSlot) probe(ctx context.Context, keyVar string) bool {
	s.mu.RLock()
	p, gen, missing := s.p, s.gen, s.missing
	s.mu.RUnlock()
	if missing {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	_, err := p.Models(cctx)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	problem := probeProblem(s.name, keyVar, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return s.problem == ""
	}
	if problem != "" && problem != s.problem {
		s.log.Warn("model provider is down", zap.String("provider", s.name), zap.String("reason", problem), zap.Error(err))
	}
	s.problem = problem
	return problem == ""
}

// probeProblem says what a failed model listing means for readiness, by
// the failure's kind (llm.Policies), naming the key and its variable when
// the key was refused. "" when the provider may serve.
func probeProblem(name, keyVar string, err error) string {
	if err == nil {
		return ""
	}
	var api *llm.APIError
	if errors.As(err, &api) && api.Status == http.StatusNotFound {
		return "" // no model list at this server: the first call tells
	}
	f := llm.Classify(err)
	switch {
	case f.Kind == llm.KindAuth:
		return "the API key was refused: " + keyHint(name, keyVar)
	case f.Kind == llm.KindQuota:
		return "the account's quota is used up (providers." + name + ")"
	case f.Health == llm.SignalDown, f.Kind == llm.KindDeadline:
		return f.SafeReason() + " (providers." + name + ".base_url)"
	}
	return ""
}

// keyHint names where a provider's key comes from, for a person to fix it.
func keyHint(name, keyVar string) string {
	key := "providers." + name + ".api_key"
	if keyVar != "" {
		return fmt.Sprintf("put a valid key in %s (%s), or paste one on the web page", keyVar, key)
	}
	return fmt.Sprintf("put a valid key in %s, or paste one on the web page", key)
}

// replace builds the adapter from pc (a new key), lists its models and,
// when they are served, puts it in place of the old one: calls already
// running finish on the old adapter. It returns the probe's problem
// without replacing when the new key does not work either.
func (s *providerSlot) replace(ctx context.Context, pc config.ProviderConfig, keyVar string) error {
	p, err := newProvider(s.name, pc, s.hc, s.log)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	_, err = p.Models(cctx)
	cancel()
	if problem := probeProblem(s.name, keyVar, err); problem != "" {
		return errors.New(problem)
	}
	s.mu.Lock()
	s.pc, s.p, s.problem, s.missing = pc, p, "", false
	s.gen++
	s.mu.Unlock()
	s.log.Info("model provider replaced with a new key", zap.String("provider", s.name))
	return nil
}

// modelProviders are the provider slots of one process, by name.
type modelProviders struct {
	cfg   *config.Config
	slots map[string]*providerSlot
	// used are the providers the model settings use, in name order: only
	// they count for readiness.
	used []string
	// changed is signalled when a slot is replaced, so the probe loop
	// looks again at once.
	changed chan struct{}
}

// newModelProviders builds every configured provider's slot.
func newModelProviders(cfg *config.Config, hc *http.Client, log *zap.Logger) (*modelProviders, error) {
	mp := &modelProviders{cfg: cfg, slots: make(map[string]*providerSlot, len(cfg.Providers)),
		used: cfg.UsedProviders(), changed: make(chan struct{}, 1)}
	for _, name := range sortedKeys(cfg.Providers) {
		s, err := newProviderSlot(name, cfg.Providers[name], cfg.ProviderProblem(name), hc, log)
		if err != nil {
			return nil, err
		}
		mp.slots[name] = s
	}
	return mp, nil
}

// Used lists the slots of the providers in use.
func (mp *modelProviders) Used() []*providerSlot {
	out := make([]*providerSlot, 0, len(mp.used))
	for _, name := range mp.used {
		if s := mp.slots[name]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Check is the readiness check "providers": nil while every provider in
// use may serve, else each one's problem.
func (mp *modelProviders) Check() error {
	var errs []error
	for _, s := range mp.Used() {
		if err := s.Problem(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// NeedsKey reports whether a provider in use has no key: the web page then
// opens on the setup view.
func (mp *modelProviders) NeedsKey() bool {
	return slices.ContainsFunc(mp.Used(), (*providerSlot).Missing)
}

// SetKey replaces providers.<name>'s adapter with one using key, after a
// model listing proved the key (see providerSlot.replace).
func (mp *modelProviders) SetKey(ctx context.Context, name, key string) error {
	s := mp.slots[name]
	if s == nil {
		return fmt.Errorf("providers.%s is not configured", name)
	}
	s.mu.RLock()
	pc := s.pc
	s.mu.RUnlock()
	pc.APIKey = key
	if err := s.replace(ctx, pc, mp.cfg.KeyVar(name)); err != nil {
		return err
	}
	select {
	case mp.changed <- struct{}{}:
	default:
	}
	return nil
}

// Run probes every provider in use once at start and then, while one is
// down for a reason a retry may cure, again with backoff, until ctx ends.
func (mp *modelProviders) Run(ctx context.Context) error {
	wait := probeRetryMin
	for {
		up := true
		for _, s := range mp.Used() {
			if !s.Missing() && !s.probe(ctx, mp.cfg.KeyVar(s.name)) {
				up = false
			}
		}
		if up {
			wait = probeRetryMin
		}
		var retry <-chan time.Time
		var t *time.Timer
		if !up {
			t = time.NewTimer(wait)
			retry = t.C
			wait = min(2*wait, probeRetryMax)
		}
		select {
		case <-ctx.Done():
		case <-mp.changed:
		case <-retry:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// ModelAdvice says, for the operator at a terminal, what to fix when the
// last model call failed on the key: the provider, the variable its key
// comes from and the key path, as doctor names them. "" otherwise. The
// chat user reads only the short message of llm.Policies; this is the
// operator's line (`nanobot agent` prints it on stderr).
func (c *Core) ModelAdvice() string {
	err, _ := c.ModelHealth.LastFailure()
	if err == nil || llm.Classify(err).Kind != llm.KindAuth {
		return ""
	}
	var api *llm.APIError
	if !errors.As(err, &api) || api.Provider == "" {
		return "the model provider refused the API key; `nanobot doctor` names the provider and the key to fix"
	}
	name := api.Provider
	if problem := c.Config.ProviderProblem(name); problem != "" {
		return fmt.Sprintf("providers.%s: %s", name, problem)
	}
	return fmt.Sprintf("providers.%s refused the API key: %s (`nanobot doctor` checks it)", name, keyHint(name, c.Config.KeyVar(name)))
}
