package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Route is a model string resolved against the configuration: which
// provider to call, with which model id, and within which limits.
type Route struct {
	// Name is what was resolved: a name under routes, or "provider/model".
	Name string
	// Provider is the key under providers; ProviderConfig is its entry (with
	// Kind filled in for a name that names a kind, ProviderKinds).
	Provider       string
	ProviderConfig ProviderConfig
	// Model is the id sent to the provider ("gpt-4o-mini",
	// "meta-llama/llama-3.3-70b" for openrouter/meta-llama/llama-3.3-70b).
	Model string
	// Fallbacks are model strings to try, in order, when this one fails with
	// a retryable error: the route's own list, or agents.fallbacks for a
	// plain provider/model string. Each needs its own ResolveRoute.
	Fallbacks []string
	// ContextWindow and MaxTokens are the route's values, or the agents.*
	// values when the route leaves them 0 or the string is not a route.
	ContextWindow int
	MaxTokens     int
}

// ResolveRoute resolves a model string: a name under routes first, then
// "provider/model" split at the first slash (model ids may contain slashes).
// The error says what is wrong and how to fix it; Validate reports it under
// the key that holds the string.
func (c *Config) ResolveRoute(name string) (Route, error) {
	if name == "" {
		return Route{}, fmt.Errorf("empty model (write provider/model, e.g. openai/gpt-4o-mini, or a name under routes)")
	}
	if rc, ok := c.Routes[name]; ok {
		r, err := c.resolveDirect(rc.Model)
		if err != nil {
			return Route{}, fmt.Errorf("route %s: %w", name, err)
		}
		r.Name = name
		r.Fallbacks = slices.Clone(rc.Fallbacks)
		if rc.ContextWindow > 0 {
			r.ContextWindow = rc.ContextWindow
		}
		if rc.MaxTokens > 0 {
			r.MaxTokens = rc.MaxTokens
		}
		return r, nil
	}
	if !strings.Contains(name, "/") {
		return Route{}, fmt.Errorf("%q is neither provider/model nor a name under routes (write e.g. openai/%s%s)",
			name, name, c.routeList())
	}
	r, err := c.resolveDirect(name)
	if err != nil {
		return Route{}, err
	}
	r.Fallbacks = slices.Clone(c.Agents.Fallbacks)
	return r, nil
}

// resolveDirect resolves "provider/model" without looking at routes (a
// route's model cannot name another route, so routes never loop).
func (c *Config) resolveDirect(s string) (Route, error) {
	provider, model, ok := strings.Cut(s, "/")
	if !ok || provider == "" || model == "" {
		return Route{}, fmt.Errorf("%q is not provider/model (write e.g. openai/gpt-4o-mini)", s)
	}
	pc, ok := c.Providers[provider]
	if !ok {
		return Route{}, fmt.Errorf("provider %q is not configured (add providers.%s with kind and base_url, or use one of: %s)",
			provider, provider, strings.Join(slices.Sorted(maps.Keys(c.Providers)), ", "))
	}
	pc.Kind = kindOf(provider, pc)
	return Route{
		Name:           s,
		Provider:       provider,
		ProviderConfig: pc,
		Model:          model,
		ContextWindow:  c.Agents.ContextWindow,
		MaxTokens:      c.Agents.MaxTokens,
	}, nil
}

func (c *Config) routeList() string {
	if len(c.Routes) == 0 {
		return ""
	}
	return ", or one of the routes: " + strings.Join(slices.Sorted(maps.Keys(c.Routes)), ", ")
}
