// Package daemon wires nanobot together: it builds every component from the
// configuration, runs them under one errgroup, and shuts them down in order
// (stop intake, drain turns within the grace period, flush replies, close
// channels and files). It is the only package that imports everything, and
// the only composition root: every command, doctor, status and pairing
// included, takes its parts from here, so what they check is what the
// gateway runs (arch_test.go keeps cmd/nanobot to flags and printing).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/agent/agentconfig"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/mcp"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/metrics"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/provider/anthropic"
	"github.com/nanobot-go/nanobot/internal/provider/gemini"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/usage/usagejs"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// busSize bounds each bus queue; see internal/bus for the back-pressure rule.
const busSize = 256

// Core is what every mode needs: the bus, sessions, model router, tools and
// the agent. Gateway mode adds channels and the HTTP listener around it.
type Core struct {
	Config *config.Config
	// Bus holds the process's local queues: the agent reads inbound
	// messages from it and the channel manager outbound ones.
	Bus *bus.Bus
	// Pub is where this process publishes: Bus itself, or NATS.
	Pub Publisher
	// NATS is the NATS bus (bus.backend: nats in the gateway), else nil.
	NATS *natsbus.Bus
	// Sessions are the JSONL files in the workspace, or the JetStream
	// stream with bus.nats.sessions: jetstream in a split gateway.
	Sessions Sessions
	Router   *provider.Router
	Tools    *tools.Registry
	MCP      *mcp.Manager // connects MCP servers' tools into Tools; the gateway runs it
	Agent    *agent.Agent
	// Metrics are fed by the agent, tools and model calls; gateway mode
	// serves them on /metrics.
	Metrics *metrics.Metrics
	// ModelHealth is the outcome of the last model call, for /readyz.
	ModelHealth *health.ModelHealth
	// Providers are the model providers' slots: what is known to be wrong
	// with each (a missing or refused key), for /readyz, status and the
	// setup page, which can give one a new key.
	Providers *modelProviders
	// Usage is the usage ledger: every model call, whoever made it, with
	// its tokens and cost (docs/usage.md). /usage, the panel, the CLI and
	// the metrics all read it.
	Usage *usage.Ledger
	// Budget admits new model calls against budget: (nil-safe).
	Budget *usage.Budget
	// recorder is where model calls are recorded: Usage, or on the NATS
	// bus usageShared, which also reads the other processes' records.
	recorder    usage.Recorder
	usageShared *usagejs.Shared
	// warnings carry the budget's warnings to the owner's chat.
	warnings *ownerWarnings
	root     *workspace.Root
	files    *workspace.Files
	log      *zap.Logger
}

// Options are what the command line adds to the configuration.
type Options struct {
	Version string
	// DataDir holds the daemon's own state next to the config: the pairing
	// store and the Telegram update journal [the config file's directory].
	DataDir string
	// HTTPClient is used for every provider call [modelClient: keeps a
	// connection per agents.max_concurrent_turns slot].
	HTTPClient *http.Client
	// Listener replaces listening on gateway.listen: an already open
	// listener (tests on port 0, socket activation). Run closes it.
	Listener net.Listener

	// commands are chat commands the gateway answers outside the agent
	// (/web); see agent.Deps.Commands.
	commands map[string]agent.Command
	// owner is /usage's owner rule (usageOwner) [the terminal and the
	// web page only].
	owner func(bus.InboundMessage) bool

	// Role is what a gateway process serves: RoleAll (default),
	// RoleChannels or RoleAgent; the last two need bus.backend: nats.
	// Empty (the terminal's nanobot agent) always uses the in-process bus.
	Role string
}

// Gateway roles (nanobot gateway --role, docs/scale-out.md).
const (
	RoleAll      = "all"
	RoleChannels = "channels"
	RoleAgent    = "agent"
)

// Sessions is what the daemon and the components it wires use of a session
// store; the methods mean what they mean on *session.Store.
type Sessions interface {
	// agent.Sessions are the agent's: Get, Append, Stage, Sync, SetMeta
	// and Archive.
	agent.Sessions
	// List is for /status, the web panel and the heartbeat.
	List() ([]session.Info, error)
	// Forget makes a worker read what other workers wrote to a session
	// when it takes one of its messages.
	Forget(key string) error
	// Cached and CachedBytes are for metrics.
	Cached() int
	CachedBytes() int64
	Close() error
}

var (
	_ Sessions = (*session.Store)(nil)
	_ Sessions = (*jsstore.Store)(nil)
)

// Publisher is where a process publishes inbound and outbound messages.
type Publisher interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
	PublishOutbound(ctx context.Context, m bus.OutboundMessage) error
}

// SessionsMovedFile, in the data dir, marks that the one-time move of an
// old <workspace>/sessions/ ran (session.MoveDir): while it exists no
// sessions/ in the workspace is imported again. It lies where no command
// may write (the sandbox protects it), so a command cannot remove it to
// have a planted directory imported. Deleting it by hand imports again.
const SessionsMovedFile = "sessions-moved.json"

// sessionsMovedPath is SessionsMovedFile in dataDir; "" (no marker, the
// move runs at each start) without a data dir.
func sessionsMovedPath(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, SessionsMovedFile)
}

// checkRole refuses a role the bus cannot serve.
func checkRole(cfg *config.Config, role string) error {
	switch role {
	case "", RoleAll:
		return nil
	case RoleChannels, RoleAgent:
		if cfg.Bus.Backend != config.BusNATS {
			return fmt.Errorf("--role %s runs beside other processes, which needs bus.backend: nats (see docs/scale-out.md)", role)
		}
		return nil
	}
	return fmt.Errorf("--role: must be one of all, channels, agent, got %q", role)
}

// Build builds the core from cfg. Its only I/O is opening the usage ledger
// (one line per past day and today's records), making sure the workspace
// exists (installing the template when onboard was skipped, never
// overwriting) and opening it for the file tools.
func Build(cfg *config.Config, opts Options, log *zap.Logger) (_ *Core, err error) {
	if err := checkRole(cfg, opts.Role); err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = modelClient(cfg.Agents.MaxConcurrentTurns)
	}
	// Each provider sits in a slot: one without a key starts degraded and
	// the setup page can give it one while the daemon runs.
	slots, err := newModelProviders(cfg, hc, log.Named("provider"))
	if err != nil {
		return nil, err
	}
	providers := make(map[string]provider.Streamer, len(slots.slots))
	for name, s := range slots.slots {
		providers[name] = s
	}
	routes := make(map[string]provider.RouteSpec, len(cfg.Routes))
	for name, r := range cfg.Routes {
		routes[name] = provider.RouteSpec{Model: r.Model, Fallbacks: r.Fallbacks, ContextWindow: r.ContextWindow, MaxTokens: r.MaxTokens}
	}
	maxRetries := make(map[string]int, len(cfg.Providers))
	for name, pc := range cfg.Providers {
		maxRetries[name] = pc.MaxRetries
	}
	m := metrics.New(metrics.BuildInfo{Version: opts.Version, GoVersion: runtime.Version()})
	warnings := newOwnerWarnings(cfg, log.Named("usage"))
	ledger, budget, err := openUsage(cfg, m, warnings, log.Named("usage"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = ledger.Close()
		}
	}()
	// On the NATS bus every process's calls land in every ledger
	// (usagejs); the stream rides on the bus's connection, set below.
	var nb *natsbus.Bus
	var recorder usage.Recorder = ledger
	var shared *usagejs.Shared
	if opts.Role != "" && cfg.Bus.Backend == config.BusNATS {
		conn := natsbus.JetStreamFunc(func(ctx context.Context) (jetstream.JetStream, error) { return nb.JetStream(ctx) })
		shared = usagejs.New(cfg.Bus.NATS, conn, ledger, workerName(opts.Role), cfg.Usage.Retention, log.Named("usage"))
		recorder = shared
	}
	router := provider.NewRouter(providers, provider.Options{
		Default: cfg.Agents.Model, DefaultFallbacks: cfg.Agents.Fallbacks, Routes: routes,
		ContextWindow: cfg.Agents.ContextWindow, MaxRetries: maxRetries,
		Usage: recorder, Budget: budget,
	}, log.Named("router"))

	ws := cfg.Agents.Workspace
	if _, err := InstallWorkspace(ws); err != nil {
		return nil, err
	}
	// Sessions live outside the workspace (docs/sessions.md); an old one's
	// move is finished before anything opens a session file or runs a tool,
	// and it runs once ever: the marker in the data dir keeps a sessions/
	// a command plants later from being imported.
	if _, err := session.MoveDir(filepath.Join(ws, workspace.SessionsDir), cfg.Agents.SessionsDir,
		sessionsMovedPath(opts.DataDir), log.Named("session")); err != nil {
		return nil, err
	}
	root, err := workspace.OpenRoot(ws, workspace.Options{Restrict: cfg.Tools.RestrictToWorkspace, SessionsDir: cfg.Agents.SessionsDir})
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	// The daemon's own reads and writes of the workspace (the prompt,
	// memory, skills) go through files, confined whatever the tools'
	// restriction says (docs/tools.md#the-daemon-and-the-workspace).
	files, err := workspace.OpenFiles(ws, log.Named("workspace"))
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	b := bus.New(busSize)
	// Tool output is redacted against the secrets as they are at each call:
	// the web token may be rotated while the daemon runs.
	redact := logging.NewSecrets(cfg.Secrets(), SecretFiles(cfg, opts.DataDir)).Redact
	m.WatchQueues(b.InboundLen, b.OutboundLen)
	var pub Publisher = b
	var store Sessions
	if opts.Role != "" && cfg.Bus.Backend == config.BusNATS {
		// The bus takes messages only once it runs, after store is set.
		nb = newNATSBus(cfg, opts.Role, b, func(key string) error { return store.Forget(key) }, log)
		pub = nb
		m.WatchNATS(opts.Role, nb.Held, nb.Healthy)
	}
	warnings.pub = pub
	store = newSessions(cfg, nb, log.Named("session"))
	m.WatchSessions(store.Cached, store.CachedBytes)
	modelHealth := &health.ModelHealth{}
	regOpts := tools.RegistryLimits(cfg.Agents)
	regOpts.Redact, regOpts.Observer = redact, m
	reg := tools.NewRegistry(regOpts, log.Named("tools"))
	if err := registerBuiltins(reg, cfg, opts.DataDir, root, pub, log.Named("tools")); err != nil {
		return nil, err
	}
	mcpServers := newMCP(cfg, reg, opts.Version, Secrets(cfg, opts.DataDir), log.Named("mcp"))
	// /status ends with the provider's trouble, if any, and the MCP servers.
	statusLines := func() []string { return append(modelStatus(modelHealth), mcpServers.StatusLines()...) }
	consolidator := memory.NewConsolidator(memory.NewFiles(files), router, memory.Config{MaxTokens: cfg.Agents.MaxTokens}, log.Named("memory"))
	owner := opts.owner
	if owner == nil {
		owner = usageOwner(&webLinks{cfg: cfg})
	}
	ag := agent.New(agentconfig.From(cfg, opts.Version), agent.Deps{
		Model:    observedModel{Model: router, metrics: m, health: modelHealth},
		Sessions: store, Tools: reg, Out: pub, StatusLines: statusLines, Redact: redact, Observer: m,
		Prompt: &agent.PromptBuilder{Workspace: ws, Files: files, MaxFileChars: cfg.Agents.BootstrapMaxChars, Version: opts.Version,
			Skills: skills.Loader{Builtin: builtin.FS()}},
		Memory: consolidator,
		// Subagents may not talk to the chat, start subagents or schedule jobs.
		SubagentTools: reg.Without("message", agent.SpawnToolName, "cron"),
		In:            pub,
		Commands:      opts.commands,
		Budget:        budget,
		Usage:         ledger,
		Owner:         owner,
	}, log.Named("agent"))
	// The footers of running turns add up the ledger's own records.
	ledger.OnRecord(ag.UsageRecorded)
	if err := reg.Register(ag.SpawnTool()); err != nil {
		_ = root.Close()
		_ = files.Close()
		return nil, fmt.Errorf("register tool spawn: %w", err)
	}
	return &Core{Config: cfg, Bus: b, Pub: pub, NATS: nb, Sessions: store, Router: router, Tools: reg, MCP: mcpServers, Agent: ag,
		Metrics: m, ModelHealth: modelHealth, Providers: slots, Usage: ledger, Budget: budget, recorder: recorder, usageShared: shared, warnings: warnings, root: root, files: files, log: log}, nil
}

// modelProvider is a provider adapter: it streams turns for the router and
// lists its models for doctor (the cheapest call that proves the key).
type modelProvider interface {
	provider.Streamer
	Models(ctx context.Context) ([]string, error)
}

// newProvider builds the adapter of providers.<name> for its kind. It is
// the one place a kind maps to an adapter, so doctor calls what the
// gateway's router calls.
func newProvider(name string, pc config.ProviderConfig, hc *http.Client, log *zap.Logger) (modelProvider, error) {
	switch pc.Kind {
	case openai.API:
		return openai.New(name, pc, hc, log), nil
	case openai.ResponsesAPI:
		return openai.NewResponses(name, pc, hc, log), nil
	case anthropic.API:
		return anthropic.New(name, pc, hc, log), nil
	case gemini.API:
		return gemini.New(name, pc, hc, log), nil
	}
	return nil, fmt.Errorf("providers.%s.kind: %q is not supported (one of %s)", name, pc.Kind, strings.Join(config.ProviderKinds, ", "))
}

// newSessions builds the session store: the <PREFIX>_SESSIONS stream with
// bus.nats.sessions: jetstream in a gateway on the NATS bus (nb), JSONL
// files in agents.sessions_dir otherwise. The stream store shares nb's connection.
func newSessions(cfg *config.Config, nb *natsbus.Bus, log *zap.Logger) Sessions {
	if nb != nil && cfg.Bus.NATS.Sessions == config.SessionsJetStream {
		return jsstore.New(cfg.Bus.NATS, nb, jsstore.Options{CacheSize: cfg.Agents.SessionCache, CacheBytes: cfg.Agents.SessionCacheBytes}, log)
	}
	return session.NewStore(cfg.Agents.SessionsDir, session.Options{CacheSize: cfg.Agents.SessionCache, CacheBytes: cfg.Agents.SessionCacheBytes}, log)
}

// newNATSBus builds the NATS bus of a gateway process in role. A worker
// re-reads a session (forget) when it takes one of its messages: the
// previous turn may have run on another worker.
func newNATSBus(cfg *config.Config, role string, local *bus.Bus, forget func(key string) error, log *zap.Logger) *natsbus.Bus {
	roles := natsbus.Roles{Agent: role != RoleChannels, Channels: role != RoleAgent}
	var onTake func(string)
	if roles.Agent {
		onTake = func(key string) {
			if err := forget(key); err != nil {
				log.Warn("cannot drop the cached session; it is read again on use", zap.String("session", key), zap.Error(err))
			}
		}
	}
	return natsbus.New(cfg.Bus.NATS, natsbus.Options{
		Roles: roles, Capacity: cfg.Agents.MaxConcurrentTurns, Name: "nanobot " + role, OnTake: onTake,
	}, local, log.Named("nats"))
}

// RunAgent serves the bus until its inbound side closes or ctx ends.
func (c *Core) RunAgent(ctx context.Context) error {
	return c.Agent.Run(ctx, c.Bus.Inbound())
}

// Close waits for abandoned tool calls briefly, then closes the session
// files and the workspace.
func (c *Core) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Tools.Wait(ctx); err != nil {
		c.log.Warn("tool calls still running at shutdown", zap.Error(err))
	}
	return errors.Join(c.Sessions.Close(), c.Usage.Close(), c.root.Close(), c.files.Close())
}

// LoadConfig is config.Load with the channel table's sections: how every
// command reads the configuration file.
func LoadConfig(path string) (*config.Config, error) {
	return config.Load(path, kinds.Sections()...)
}

// DefaultConfig is config.Defaults with the channel table's sections.
func DefaultConfig() config.Config {
	return config.Defaults(kinds.Sections()...)
}

// StarterYAML is config.StarterYAML with the channel table's sections: the
// file `nanobot onboard` writes.
func StarterYAML(workspace string) []byte {
	return config.StarterYAML(workspace, kinds.Sections()...)
}
