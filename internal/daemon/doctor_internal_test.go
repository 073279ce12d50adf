package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestProviderFix(t *testing.T) {
	withKey := config.ProviderConfig{APIKey: "sk-something", BaseURL: "http://localhost:11434/v1"}
	tests := []struct {
		name   string
		pc     config.ProviderConfig
		err    error
		status Verdict
		fix    string
	}{
		{"no key", config.ProviderConfig{}, &llm.APIError{Status: 401}, VerdictFail, "set providers.p.api_key (e.g. api_key: ${P_API_KEY}"},
		{"key refused", withKey, &llm.APIError{Status: 401}, VerdictFail, "the key was refused"},
		{"quota", withKey, &llm.APIError{Status: 429, Type: "insufficient_quota", Kind: llm.KindQuota}, VerdictFail, "quota or billing"},
		{"no model list", withKey, &llm.APIError{Status: 404}, VerdictWarn, "no model list at http://localhost:11434/v1/models"},
		{"down", withKey, &llm.APIError{Status: 0, Type: "transport", Message: "connection refused"}, VerdictFail, "cannot reach http://localhost:11434/v1"},
		{"rate-limited", withKey, &llm.APIError{Status: 429}, VerdictFail, "rate-limiting this key"},
		{"slow", withKey, fmt.Errorf("list models: %w", context.DeadlineExceeded), VerdictFail, "cannot reach"},
		{"other", withKey, errors.New("strange"), VerdictFail, "check providers.p (base_url, api_key, extra_headers)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fix := providerFix("p", tt.pc, tt.err)
			if s != tt.status || !strings.Contains(fix, tt.fix) {
				t.Errorf("providerFix = %s %q, want %s and %q", s, fix, tt.status, tt.fix)
			}
		})
	}
}

func TestUsedModels(t *testing.T) {
	cfg := &config.Config{
		Agents: config.AgentsConfig{Model: "smart", Fallbacks: []string{"anthropic/claude-haiku-4-5"}},
		Routes: map[string]config.RouteConfig{
			"smart": {Model: "openrouter/anthropic/claude-sonnet-4.5", Fallbacks: []string{"openai/gpt-4.1"}},
			"local": {Model: "ollama/qwen2.5:14b"},
		},
	}
	got := fmt.Sprint(usedModels(cfg))
	want := "map[anthropic:[claude-haiku-4-5] ollama:[qwen2.5:14b] openai:[gpt-4.1] openrouter:[anthropic/claude-sonnet-4.5]]"
	if got != want {
		t.Errorf("usedModels = %s, want %s", got, want)
	}
}

// TestNewProviderCoversEveryKind: newProvider is the one place a kind maps
// to an adapter, for the router and for doctor; every row of
// config.ProviderKinds must build one that lists models, no adapter may be
// without its row, and any other kind is refused.
func TestNewProviderCoversEveryKind(t *testing.T) {
	names := config.ProviderKindNames()
	used := map[string]bool{}
	for _, k := range config.ProviderKinds {
		used[k.AdapterName()] = true
	}
	for adapter := range adapters {
		if !used[adapter] {
			t.Errorf("adapter %q serves no row of config.ProviderKinds", adapter)
		}
	}
	for _, kind := range append(names, "ollama-native") {
		t.Run(kind, func(t *testing.T) {
			p, err := newProvider("p", config.ProviderConfig{Kind: kind, APIKey: "k"}, http.DefaultClient, zap.NewNop())
			known := slices.Contains(names, kind)
			switch {
			case known && (err != nil || p == nil):
				t.Errorf("kind %q: %v, %v; want an adapter", kind, p, err)
			case !known && (err == nil || !strings.Contains(err.Error(), "providers.p.kind")):
				t.Errorf("kind %q: err %v; want it refused naming providers.p.kind", kind, err)
			}
		})
	}
}
