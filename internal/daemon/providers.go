package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/anthropic"
	"github.com/nanobot-go/nanobot/internal/provider/gemini"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
)

// modelProvider is a provider adapter: it streams turns for the router and
// lists its models for doctor (the cheapest call that proves the key).
type modelProvider interface {
	provider.Streamer
	Models(ctx context.Context) ([]string, error)
}

// adapterFunc builds the adapter of providers.<name>.
type adapterFunc func(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) modelProvider

// adapters holds the constructor of each adapter a row of
// config.ProviderKinds names (the row says what the configuration knows of
// the kind: its default address, its key's variable, its options; the
// adapter reads its own errors). TestNewProviderCoversEveryKind holds every
// row to an adapter and every adapter to a row.
var adapters = map[string]adapterFunc{
	openai.API: func(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) modelProvider {
		return openai.New(name, pc, hc, log)
	},
	openai.ResponsesAPI: func(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) modelProvider {
		return openai.NewResponses(name, pc, hc, log)
	},
	anthropic.API: func(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) modelProvider {
		return anthropic.New(name, pc, hc, log)
	},
	gemini.API: func(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) modelProvider {
		return gemini.New(name, pc, hc, log)
	},
}

// newProvider builds the adapter of providers.<name> for its kind. It is
// the one place a kind maps to an adapter, so doctor calls what the
// gateway's router calls.
func newProvider(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) (modelProvider, error) {
	if k, ok := config.LookupProviderKind(pc.Kind); ok {
		if build, ok := adapters[k.AdapterName()]; ok {
			return build(name, pc, hc, log), nil
		}
	}
	return nil, fmt.Errorf("providers.%s.kind: %q is not supported (one of %s)", name, pc.Kind, strings.Join(config.ProviderKindNames(), ", "))
}
