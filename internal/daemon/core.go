// Package daemon wires nanobot together: it builds every component from the
// configuration, runs them under one errgroup, and shuts them down in order
// (stop intake, drain turns within the grace period, flush replies, close
// channels and files). It is the only package that imports everything.
package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// busSize bounds each bus queue; see internal/bus for the back-pressure rule.
const busSize = 256

// Core is what every mode needs: the bus, sessions, model router, tools and
// the agent. Gateway mode adds channels and the HTTP listener around it.
type Core struct {
	Config   *config.Config
	Bus      *bus.Bus
	Sessions *session.Store
	Router   *provider.Router
	Tools    *tools.Registry
	Agent    *agent.Agent
	log      *zap.Logger
}

// Options are what the command line adds to the configuration.
type Options struct {
	Version string
	// HTTPClient is used for every provider call [a client with sane timeouts].
	HTTPClient *http.Client
}

// NewCore builds the core from cfg. It does no I/O beyond what the
// components' constructors need (none).
func NewCore(cfg *config.Config, opts Options, log *zap.Logger) (*Core, error) {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	providers := make(map[string]provider.Streamer, len(cfg.Providers))
	for name, pc := range cfg.Providers {
		switch pc.Kind {
		case "openai":
			providers[name] = openai.New(name, pc, hc, log.Named("provider").With(zap.String("provider", name)))
		default:
			return nil, fmt.Errorf("providers.%s.kind: %q is not supported", name, pc.Kind)
		}
	}
	routes := make(map[string]provider.RouteSpec, len(cfg.Routes))
	for name, r := range cfg.Routes {
		routes[name] = provider.RouteSpec{Model: r.Model, Fallbacks: r.Fallbacks, ContextWindow: r.ContextWindow, MaxTokens: r.MaxTokens}
	}
	router := provider.NewRouter(providers, provider.Options{
		Default: cfg.Agents.Model, DefaultFallbacks: cfg.Agents.Fallbacks, Routes: routes,
	}, log.Named("router"))

	ws := cfg.Agents.Workspace
	b := bus.New(busSize)
	store := session.NewStore(filepath.Join(ws, "sessions"), session.Options{CacheSize: cfg.Agents.SessionCache}, log.Named("session"))
	reg := tools.NewRegistry(tools.RegistryOptions{Timeout: cfg.Agents.ToolTimeout, MaxOutput: cfg.Agents.MaxToolOutput}, log.Named("tools"))
	if err := registerBuiltins(reg, cfg, b); err != nil {
		return nil, err
	}
	ag := agent.New(agent.Config{
		Workspace:          ws,
		MaxToolIterations:  cfg.Agents.MaxToolIterations,
		MaxConcurrentTurns: cfg.Agents.MaxConcurrentTurns,
		MaxTokens:          cfg.Agents.MaxTokens,
		Temperature:        cfg.Agents.Temperature,
		MaxInputChars:      cfg.Agents.MaxInputChars,
		Version:            opts.Version,
	}, agent.Deps{
		Model: router, Sessions: store, Tools: reg, Out: b,
		Prompt: &agent.PromptBuilder{Workspace: ws, MaxFileChars: cfg.Agents.BootstrapMaxChars, Version: opts.Version},
	}, log.Named("agent"))
	return &Core{Config: cfg, Bus: b, Sessions: store, Router: router, Tools: reg, Agent: ag, log: log}, nil
}

// Prepare makes sure the workspace exists (creating it from the template if
// onboard was skipped), so a first run works.
func (c *Core) Prepare() error {
	return workspace.EnsureDir(c.Config.Agents.Workspace)
}

// RunAgent serves the bus until its inbound side closes or ctx ends.
func (c *Core) RunAgent(ctx context.Context) error {
	return c.Agent.Run(ctx, c.Bus.Inbound())
}

// Close flushes and closes the session files.
func (c *Core) Close() error {
	return c.Sessions.Close()
}
