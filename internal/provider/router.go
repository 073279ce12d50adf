package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
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

// Options configure a Router.
type Options struct {
	// Default is the route used when a session has none (agents.model).
	Default string
	// DefaultFallbacks apply to Default and to any "provider/model" string
	// without a route of its own (agents.fallbacks).
	DefaultFallbacks []string
	// Routes are the named routes.
	Routes map[string]RouteSpec
}

// ErrUnknownRoute is returned for a route that names neither a configured
// route nor a configured provider; the caller should tell the user which
// routes exist.
var ErrUnknownRoute = errors.New("unknown route")

// Router resolves routes and runs model calls on the configured providers.
// It is safe for concurrent use.
type Router struct {
	providers map[string]Streamer
	opts      Options
	log       *zap.Logger
}

// NewRouter returns a router over the given providers (keyed by their
// configured name).
func NewRouter(providers map[string]Streamer, opts Options, log *zap.Logger) *Router {
	return &Router{providers: providers, opts: opts, log: log}
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

// Resolve turns a route name ("" for the default) into a Route.
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
		rt.ContextWindow = spec.ContextWindow
		rt.MaxTokens = spec.MaxTokens
		if rt.ContextWindow == 0 {
			rt.ContextWindow = ContextWindow(rt.Model)
		}
		return rt, nil
	}
	rt, err := r.resolveModel(name, name)
	if err != nil {
		return Route{}, err
	}
	rt.Fallbacks = r.opts.DefaultFallbacks
	rt.ContextWindow = ContextWindow(rt.Model)
	return rt, nil
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

// Complete runs req on the route and returns the accumulated assistant
// message, with Meta recording the route, provider, api and model that
// answered (S-V4). onDelta, if not nil, sees every delta as it arrives (for
// streaming drafts); a DeltaStart tells it a new attempt began and any draft
// so far is void. A failed call returns an error and no message, so nothing
// half-made is ever persisted (S-A2).
func (r *Router) Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
	rt, err := r.Resolve(route)
	if err != nil {
		return llm.Message{}, err
	}
	return r.attempt(ctx, rt, req, onDelta)
}

// attempt streams one call on one route.
func (r *Router) attempt(ctx context.Context, rt Route, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
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
	if err != nil {
		return llm.Message{}, fmt.Errorf("route %s (%s/%s): %w", rt.Name, rt.Provider, rt.Model, err)
	}
	msg.Meta.Route = rt.Name
	if msg.Meta.Provider == "" {
		msg.Meta.Provider = rt.Provider
	}
	if msg.Meta.Model == "" {
		msg.Meta.Model = rt.Model
	}
	return msg, nil
}

// Check reports whether route resolves to a configured provider.
func (r *Router) Check(route string) error {
	_, err := r.Resolve(route)
	return err
}
