package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResolveRoute(t *testing.T) {
	isolateEnv(t)
	c := mustLoad(t, `
agents:
  model: fast
  fallbacks: [anthropic/claude-haiku-4-5]
  max_tokens: 4000
  context_window: 100000
providers:
  openrouter:
    kind: openai
    base_url: https://openrouter.ai/api/v1
    timeout: 90s
routes:
  fast:
    model: openrouter/meta-llama/llama-3.3-70b-instruct
    fallbacks: [openai/gpt-4o-mini]
    context_window: 131072
  plain:
    model: openai/gpt-4o
`)
	tests := []struct {
		name string
		want Route
	}{
		{"fast", Route{
			Name: "fast", Provider: "openrouter", Model: "meta-llama/llama-3.3-70b-instruct",
			Fallbacks: []string{"openai/gpt-4o-mini"}, ContextWindow: 131072, MaxTokens: 4000,
		}},
		{"plain", Route{
			Name: "plain", Provider: "openai", Model: "gpt-4o",
			Fallbacks: []string{}, ContextWindow: 100000, MaxTokens: 4000,
		}},
		{"anthropic/claude-sonnet-4-5", Route{
			Name: "anthropic/claude-sonnet-4-5", Provider: "anthropic", Model: "claude-sonnet-4-5",
			Fallbacks: []string{"anthropic/claude-haiku-4-5"}, ContextWindow: 100000, MaxTokens: 4000,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.ResolveRoute(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if got.ProviderConfig.Kind == "" || got.ProviderConfig.BaseURL == "" {
				t.Errorf("provider config not filled: %+v", got.ProviderConfig)
			}
			got.ProviderConfig = ProviderConfig{}
			if got.Fallbacks == nil {
				got.Fallbacks = []string{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ResolveRoute(%q) =\n%+v\nwant\n%+v", tt.name, got, tt.want)
			}
		})
	}

	r, _ := c.ResolveRoute("fast")
	if r.ProviderConfig.Timeout != 90*time.Second || r.ProviderConfig.Kind != "openai" {
		t.Errorf("fast's provider config = %+v, want openrouter's", r.ProviderConfig)
	}
	r.Fallbacks[0] = "changed"
	if c.Routes["fast"].Fallbacks[0] != "openai/gpt-4o-mini" {
		t.Error("changing a resolved route's fallbacks changed the config")
	}
}

func TestResolveRouteErrors(t *testing.T) {
	c := &Config{
		Providers: map[string]ProviderConfig{"openai": {}},
		Routes:    map[string]RouteConfig{"broken": {Model: "gone/x"}},
	}
	tests := []struct{ name, want string }{
		{"", "empty model"},
		{"gpt-4o", `"gpt-4o" is neither provider/model nor a name under routes`},
		{"gone/model", `provider "gone" is not configured (add providers.gone with kind and base_url, or use one of: openai)`},
		{"/model", `"/model" is not provider/model`},
		{"broken", `route broken: provider "gone" is not configured`},
	}
	for _, tt := range tests {
		_, err := c.ResolveRoute(tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ResolveRoute(%q) error = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestResolveRouteFillsBuiltInKind(t *testing.T) {
	// A Config built in code (as other packages' tests do) may leave Kind
	// empty for the built-in names.
	c := &Config{Providers: map[string]ProviderConfig{"anthropic": {BaseURL: "http://127.0.0.1:1"}}}
	r, err := c.ResolveRoute("anthropic/claude")
	if err != nil || r.ProviderConfig.Kind != "anthropic" {
		t.Fatalf("ResolveRoute = %+v, %v; want kind anthropic", r, err)
	}
}
