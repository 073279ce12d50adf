package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/api"
	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/cursorkv"
	"github.com/nanobot-go/nanobot/internal/channels/draftkv"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/channels/pairingkv"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/httpguard"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/web"
)

// PairingFile is the pairing store's file name in the data dir.
const PairingFile = "pairing.json"

// Shutdown bounds past the grace period (see Run): how long queued replies
// may take to reach the platforms, and then how long calls in flight may
// still finish before they are cancelled. A platform that is down cannot
// hold shutdown for longer.
const (
	outboundFlush = 10 * time.Second
	outboundDrain = 2 * time.Second
)

// Gateway is the long-running daemon: the core, the chat channels, the
// outbound channel manager and the HTTP listener.
type Gateway struct {
	core *Core
	// secrets redact what the health checks and the control panel show.
	secrets *logging.Secrets
	cfg     *config.Config
	opts    Options
	log     *zap.Logger
	// channels are the chat channels' supervisors (channelrun.go): a
	// channel that cannot start is down with its reason, never the end of
	// the daemon.
	channels []*channelRun
	manager  *channels.Manager
	mux      *http.ServeMux
	health   *health.Checker
	// api serves the OpenAI-compatible API on the listener; it receives
	// channel "api"'s replies from the manager.
	api *api.Server
	// routes are what the listener serves, for the start-up line.
	routes []string
	// web is the browser chat and control panel; nil when not served.
	web     *web.Server
	pairing channels.Pairing
	// runPairing keeps the KV pairing store's view current (bus.backend:
	// nats); nil with the file store, which needs no goroutine.
	runPairing func(ctx context.Context) error
	started    time.Time
	links      *webLinks

	// schedulers publish cron runs and heartbeat work (schedule.go).
	schedulers []scheduler
	// cron is the jobs, for the cron tool and the control panel; it runs
	// as one of the schedulers in an agent process.
	cron *schedule.Cron
	// lease, with NATS, elects the one agent process that runs the
	// schedulers; nil runs them here unconditionally.
	lease *natsbus.Lease
}

// NewGateway builds the gateway. Its only I/O is Build's. opts.Role says
// which part it runs (docs/scale-out.md): channels and the HTTP surfaces,
// the agent, or both [RoleAll].
func NewGateway(cfg *config.Config, opts Options, log *zap.Logger) (*Gateway, error) {
	if opts.Role == "" {
		opts.Role = RoleAll
	}
	addSections(cfg)
	links := &webLinks{cfg: cfg}
	budgetCmd := &budgetCommand{links: links}
	opts.commands = map[string]agent.Command{"web": {Answer: links.answer}, "budget": {Answer: budgetCmd.answer}}
	opts.owner = usageOwner(links)
	core, err := Build(cfg, opts, log)
	if err != nil {
		return nil, err
	}
	budgetCmd.core = core
	secrets := logging.NewSecrets(cfg.Secrets(), SecretFiles(cfg, opts.DataDir))
	g := &Gateway{core: core, cfg: cfg, opts: opts, log: log, mux: http.NewServeMux(), started: time.Now(), links: links,
		secrets: secrets, health: health.New(secrets.Redact)}
	g.manager = channels.NewManager(core.Bus.Outbound(), channels.ManagerConfig{
		DrainTimeout: outboundDrain, Observer: core.Metrics, Drafts: g.draftRecord(),
	}, log.Named("channels"))
	if g.runs(RoleChannels) {
		if err := g.buildChannels(); err != nil {
			_ = core.Close()
			return nil, err
		}
	}
	// Cron and heartbeat run where the agent runs; among processes sharing
	// NATS, only in the one holding the scheduler lease (schedule.go).
	if g.runs(RoleAgent) {
		if err := g.buildSchedule(); err != nil {
			_ = core.Close()
			return nil, err
		}
	} else {
		g.cron = g.newCron()
	}
	if g.runs(RoleChannels) {
		if err := g.buildWeb(); err != nil {
			_ = core.Close()
			return nil, err
		}
	}
	for _, c := range g.channels {
		g.health.Add(c.name, c.Healthy)
		core.Metrics.WatchChannel(c.name, c.Healthy)
	}
	// The HTTP surfaces that carry chats (the API, the web page) belong to
	// the channels side; the model check to the agent side.
	if g.runs(RoleChannels) {
		routes := slices.Sorted(maps.Keys(cfg.Routes))
		g.api = api.New(cfg.API, api.Deps{Bus: core.Pub, Routes: routes, Observer: core.Metrics}, log.Named("api"))
		if err := g.manager.RegisterReceiver(api.Channel, g.api); err != nil {
			_ = core.Close()
			return nil, fmt.Errorf("api: %w", err)
		}
		apiWhat := "OpenAI-compatible API"
		if len(cfg.API.Keys) == 0 {
			apiWhat += ", no keys: every request refused"
		}
		g.handle("/v1/", apiWhat, g.api.Handler())
	}
	if g.runs(RoleAgent) {
		// One check per provider in use: a missing or refused key names
		// the provider and its variable before any chat finds out.
		for _, s := range core.Providers.Used() {
			g.health.Add("provider "+s.name, s.Problem)
			core.Metrics.WatchProvider(s.name, s.Problem)
		}
		g.health.Add("model", core.ModelHealth.Check)
	}
	if core.NATS != nil {
		g.health.Add("nats", core.NATS.Healthy)
	}
	g.handle("GET /healthz", "liveness", http.HandlerFunc(health.Live))
	g.handle("GET /readyz", "readiness", g.health)
	g.handle("GET /metrics", "Prometheus", core.Metrics.Handler())
	return g, nil
}

// guardConfig is what the listener's guard (internal/httpguard) checks:
// the host names it answers to — the listen host, the page's public_url,
// the Telegram webhook's and gateway.allowed_hosts (loopback names and IP
// addresses always) — and the largest body a route takes.
func (g *Gateway) guardConfig() httpguard.Config {
	cfg := g.cfg
	hosts := slices.Clone(cfg.Gateway.AllowedHosts)
	if h, _, err := net.SplitHostPort(cfg.Gateway.Listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(cfg.Channels.Web.PublicURL); err == nil && u.Host != "" {
		hosts = append(hosts, u.Hostname())
	}
	for _, k := range kinds.All {
		if k.Hosts != nil {
			hosts = append(hosts, k.Hosts(cfg)...)
		}
	}
	// A page's text and its files in one request (internal/web), or one
	// API request.
	maxBody := max(cfg.API.MaxBodyBytes, cfg.Channels.Web.MaxUploadBytes+2<<20)
	// A login or a JSON call (at most 16 KiB) arrives in one go; an upload
	// gets read_timeout.
	return httpguard.Config{Hosts: hosts, MaxBody: maxBody, ReadTimeout: cfg.Gateway.ReadTimeout,
		SmallBodyTimeout: 10 * time.Second, Probes: []string{"/healthz", "/readyz"}}
}

// runs reports whether this process serves role's part (RoleAll serves both).
func (g *Gateway) runs(role string) bool {
	return g.opts.Role == RoleAll || g.opts.Role == role
}

// handle mounts h on the HTTP listener and notes it, with what it is, for
// the start-up line.
func (g *Gateway) handle(pattern, what string, h http.Handler) {
	g.mux.Handle(pattern, h)
	g.routes = append(g.routes, pattern+" ("+what+")")
}

// announce logs, once at start, every surface the gateway serves: the chat
// channels and the HTTP listener with its routes. A gateway no chat reaches
// is legal (the listener, cron jobs and MCP servers still run) but rarely
// meant, so it says so loudly instead of starting in silence — except in an
// agent worker, which by design serves no chat itself.
func (g *Gateway) announce(addr string) {
	names := make([]string, 0, len(g.channels)+1)
	for _, c := range g.channels {
		names = append(names, c.name)
	}
	if g.web != nil {
		names = append(names, web.Channel)
	}
	// The API with keys is a way to talk to the agent like a channel.
	if g.api != nil && len(g.cfg.API.Keys) > 0 {
		names = append(names, api.Channel)
		host, _, _ := net.SplitHostPort(g.cfg.Gateway.Listen)
		if !config.IsLoopback(host) && !strings.HasPrefix(g.cfg.Channels.Web.PublicURL, "https://") {
			g.log.Warn("the OpenAI-compatible API is served on a non-loopback address without TLS: API keys and chats cross the network in clear; "+
				"put it behind a TLS reverse proxy and set channels.web.public_url to its https:// address (docs/api.md)",
				zap.String("listen", addr))
		}
	}
	g.log.Info("gateway started", zap.String("role", g.opts.Role), zap.String("bus", g.cfg.Bus.Backend),
		zap.String("listen", addr), zap.Strings("channels", names), zap.Strings("http", g.routes),
		zap.String("model", g.cfg.Agents.Model), zap.String("workspace", g.cfg.Agents.Workspace), zap.String("version", g.opts.Version))
	if len(names) == 0 && g.runs(RoleChannels) {
		sections := make([]string, 0, len(kinds.All)+1)
		for _, k := range kinds.All {
			sections = append(sections, "channels."+k.Name)
		}
		g.log.Warn("no chat channel is enabled: nobody can talk to the agent through this gateway; "+
			"enable "+strings.Join(sections, " or ")+" (enabled: true, a token, allow_from) or channels.web, "+
			"or use `nanobot agent` in a terminal", zap.String("listen", addr), zap.Strings("http", g.routes))
	}
}

func (g *Gateway) buildChannels() error {
	pairing := g.newPairing()
	g.pairing = pairing
	g.links.pairing = pairing // /web and /usage's owner read it, web page or not
	parts := channelParts{pub: g.core.Pub, pairing: pairing, dataDir: g.opts.DataDir, meter: g.core.meter(), state: g.stateStore}
	for _, k := range kinds.All {
		if !k.Enabled(g.cfg) {
			continue
		}
		// An adapter's HTTP routes are mounted at start only: one built
		// later for a new token (SetToken) must not mount them again.
		started := false
		run, err := g.addChannel(k, func(cfg *config.Config) (channels.Channel, error) {
			a, err := newAdapter(cfg, k, parts, g.log.Named(k.Name))
			if err != nil {
				return nil, err
			}
			if r, ok := a.(channels.Router); ok && len(r.Routes()) > 0 {
				if started {
					// Its handler is on the listener already (Telegram's
					// webhook): the new token takes effect at the next start.
					return nil, errNoLiveToken
				}
				for _, rt := range r.Routes() {
					g.handle(rt.Pattern, rt.What, rt.Handler)
				}
			}
			return a, nil
		})
		if err != nil {
			return err
		}
		started = true
		g.channels = append(g.channels, run)
	}
	return nil
}

// addSections gives cfg every row's section it lacks, at its defaults (a
// config built without LoadConfig, in a test), before any goroutine reads
// it: a Kind's reader adds a missing section on first use, which must not
// happen while others read the config.
func addSections(cfg *config.Config) {
	for _, k := range kinds.All {
		k.Enabled(cfg)
	}
}

// addChannel builds the supervisor of row k's channel and routes the
// channel's messages to it. A token whose variable is unset is no error:
// the channel is down with that reason, and the rest of the gateway serves.
// build may run again while the daemon runs, for a new token (SetToken).
func (g *Gateway) addChannel(k channels.Kind, build func(*config.Config) (channels.Channel, error)) (*channelRun, error) {
	name := k.Name
	run := newChannelRun(name, g.log.Named(name), g.cfg.ChannelTokenVar(name))
	run.build = build
	if err := g.manager.Register(liveChannel{run}, k.Renderer(), k.Output(g.cfg)); err != nil {
		return nil, fmt.Errorf("channels.%s: %w", name, err)
	}
	if problem := g.cfg.ChannelProblem(name); problem != "" {
		run.problem = errors.New(problem)
		g.log.Warn("channel not started: its token is missing", zap.String("channel", name), zap.String("reason", problem))
		return run, nil
	}
	ch, err := build(g.cfg)
	if err != nil {
		return nil, fmt.Errorf("channels.%s: %w", name, err)
	}
	run.ch = ch
	return run, nil
}

// channelParts are what a chat adapter gets from the daemon beside its
// config section.
type channelParts struct {
	pub     channels.Publisher
	pairing channels.Pairing
	dataDir string
	// state is where adapters keep state documents; nil: the data dir's files.
	state func(key, importFile string) channels.StateStore
	// meter counts and admits transcriptions; nil counts nothing (doctor).
	meter channels.Meter
}

// newAdapter builds the adapter of row k from its section: the one place
// adapters are built, for the gateway and for doctor's token check.
func newAdapter(cfg *config.Config, k channels.Kind, p channelParts, log *zap.Logger) (channels.Adapter, error) {
	return k.New(cfg, channels.Deps{
		Bus: p.pub, Pairing: p.pairing, DataDir: p.dataDir, Workspace: cfg.Agents.Workspace,
		Transcription: cfg.Channels.Transcription, Limits: channels.IntakeLimits(cfg.Agents, k.Access(cfg)),
		Meter: p.meter, State: p.state, Log: log,
	})
}

// newPairing builds the pairing store: with the NATS bus, the KV bucket
// <PREFIX>_PAIRING, so `nanobot pairing` and the web panel of any process
// change what this channels process checks (docs/scale-out.md); it imports
// the data dir's pairing file once. Otherwise the file, as always.
func (g *Gateway) newPairing() channels.Pairing {
	path := filepath.Join(g.opts.DataDir, PairingFile)
	if g.core.NATS == nil {
		return channels.NewPairingStore(path)
	}
	s := pairingkv.New(g.cfg.Bus.NATS, g.core.NATS, pairingkv.Options{ImportFile: path}, g.log.Named("pairing"))
	g.runPairing = s.Run
	return s
}

// stateStore is where an adapter keeps a state document (Discord's
// cursors): with the NATS bus, the key <key> of the KV bucket
// <PREFIX>_CURSORS, so a channels process restarted on another host still
// catches up (docs/scale-out.md); it imports the data dir's importFile once.
// Otherwise nil: the data dir's file, as always. The store rides on the
// bus's connection, which outlives the channels, and needs no goroutine.
func (g *Gateway) stateStore(key, importFile string) channels.StateStore {
	if g.core.NATS == nil {
		return nil
	}
	return cursorkv.New(g.cfg.Bus.NATS, g.core.NATS, cursorkv.Options{
		Key: key, ImportFile: filepath.Join(g.opts.DataDir, importFile),
	}, g.log.Named("cursors"))
}

// draftRecord is where the channel manager keeps which messages show each
// turn's draft: with the NATS bus, the KV bucket <PREFIX>_DRAFTS, so that a
// channels process restarted mid-turn edits the answer into the draft on
// screen instead of sending it again beside it (docs/scale-out.md). A single
// process has no use for one: a restart there resends from the session. Like
// the cursors, it rides on the bus's connection.
func (g *Gateway) draftRecord() channels.DraftRecord {
	if g.core.NATS == nil {
		return nil
	}
	return draftkv.New(g.cfg.Bus.NATS, g.core.NATS)
}

// RunGateway builds and runs the gateway until ctx ends.
func RunGateway(ctx context.Context, cfg *config.Config, opts Options, log *zap.Logger) error {
	g, err := NewGateway(cfg, opts, log)
	if err != nil {
		return err
	}
	return g.Run(ctx)
}

// Run serves until ctx ends, then shuts down in order
// (docs/operations.md#shutdown): /readyz turns false and the channels stop
// taking messages; the agent finishes running and queued turns within
// gateway.shutdown_grace, counted from the signal (past it the rest are
// cancelled: a started turn keeps its user message and tells the user, a
// message not started yet stays unacknowledged, so its channel delivers it
// again after the restart); queued replies are delivered (bounded by
// outboundFlush and outboundDrain); the listener and the files are closed. It
// returns nil after a signal. A channel that cannot start (its token
// refused) or stops is down with its reason while the rest serves
// (channelrun.go); only the listener failing stops the daemon.
func (g *Gateway) Run(ctx context.Context) error {
	defer func() {
		if err := g.core.Close(); err != nil {
			g.log.Error("close", zap.Error(err))
		}
	}()
	if err := g.migrateJobs(); err != nil {
		return err
	}
	ln := g.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", g.cfg.Gateway.Listen); err != nil {
			return fmt.Errorf("gateway.listen %s: %w", g.cfg.Gateway.Listen, err)
		}
	}
	guarded := httpguard.Listen(ln, g.cfg.Gateway.MaxConnections)
	full := rate.Sometimes{Interval: time.Minute}
	guarded.OnReserve = func() {
		full.Do(func() {
			g.log.Warn("HTTP listener at gateway.max_connections with every connection busy: new clients get 503 "+
				"(only /healthz and /readyz are answered) until one ends; a flood of slow clients, or raise the cap",
				zap.Int("max_connections", g.cfg.Gateway.MaxConnections))
		})
	}
	ln = guarded
	srv := &http.Server{
		Handler:           httpguard.Handler(g.guardConfig(), g.mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       g.cfg.Gateway.IdleTimeout,
		ConnState:         guarded.ConnState,
		ConnContext:       httpguard.ConnContext,
	}
	if g.web != nil {
		// Open event streams would hold Shutdown for its whole timeout.
		srv.RegisterOnShutdown(g.web.CloseStreams)
	}
	g.startWeb(ln.Addr())
	g.announce(ln.Addr().String())

	// A fatal channel error ends intake like a signal does.
	ctx, stopIntake := context.WithCancelCause(ctx)
	defer stopIntake(nil)
	// The agent and the manager outlive intake: turns finish within the
	// grace period and their replies are still delivered.
	agentCtx, cancelAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAgent()
	outCtx, cancelOut := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOut()
	// MCP servers serve the turns until the agent is done.
	mcpCtx, stopMCP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMCP()

	// The NATS bus outlives them all: the agent's last replies and the
	// manager's last acknowledgements travel on it.
	natsCtx, stopNATS := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNATS()

	var eg errgroup.Group
	natsDone := make(chan struct{})
	if g.core.NATS != nil {
		eg.Go(func() error {
			defer close(natsDone)
			if err := g.core.NATS.Run(natsCtx); err != nil {
				stopIntake(err)
				return err
			}
			return nil
		})
	} else {
		close(natsDone)
	}
	// The ledger syncs its records, and the budget's warnings go out,
	// until the bus stops: the last turns' calls are recorded by then.
	eg.Go(func() error { return g.core.Usage.Run(natsCtx) })
	if g.core.usageShared != nil {
		eg.Go(func() error { return g.core.usageShared.Run(natsCtx) })
	}
	eg.Go(func() error { return g.core.warnings.Run(natsCtx) })
	if g.runPairing != nil {
		// Its view is read until the channels stop, and its watch rides on
		// the bus's connection: it stops with the bus.
		eg.Go(func() error { return g.runPairing(natsCtx) })
	}
	agentDone := make(chan struct{})
	managerDone := make(chan struct{})
	if g.runs(RoleAgent) {
		eg.Go(func() error {
			defer close(agentDone)
			return g.core.RunAgent(agentCtx)
		})
		eg.Go(func() error { return g.core.MCP.Run(mcpCtx) })
	} else {
		close(agentDone)
	}
	if g.runs(RoleChannels) {
		eg.Go(func() error {
			defer close(managerDone)
			return g.manager.Run(outCtx)
		})
	} else {
		close(managerDone)
	}
	eg.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			// Without probes and webhooks the daemon is blind: stop, and
			// report it as the cause.
			stopIntake(fmt.Errorf("http listener %s: %w", ln.Addr(), err))
		}
		return nil
	})
	var intake sync.WaitGroup
	for _, c := range g.channels {
		intake.Go(func() { c.run(ctx) })
	}
	if g.runs(RoleAgent) {
		// Probes the providers in use once, and again while one is down.
		intake.Go(func() { _ = g.core.Providers.Run(ctx) })
	}
	// The API takes requests like a channel takes messages, until intake stops.
	if g.api != nil {
		intake.Go(func() { _ = g.api.Run(ctx) })
	}
	g.runSchedule(ctx, &intake, stopIntake)
	intake.Go(func() { newStartRelease(func() bool { return g.health.Ready().Ready }).run(ctx) })

	<-ctx.Done()
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		cause = nil // a signal: a clean shutdown
	}
	g.health.Drain()
	g.log.Info("shutting down: taking no new messages, finishing running turns", zap.Duration("grace", g.cfg.Gateway.ShutdownGrace))
	grace := time.NewTimer(g.cfg.Gateway.ShutdownGrace)
	defer grace.Stop()
	// The channels hand over what they already received; the agent keeps
	// consuming meanwhile, so this cannot block on a full queue.
	intake.Wait()
	g.core.Bus.CloseInbound()
	select {
	case <-agentDone:
	case <-grace.C:
		g.log.Warn("grace period over; cancelling the turns still running")
		cancelAgent()
		<-agentDone
	}
	stopMCP()                  // no turn is left to call their tools; Run stops and reaps them
	g.core.Bus.CloseOutbound() // the manager delivers what is queued, then returns
	flush := time.NewTimer(outboundFlush)
	defer flush.Stop()
	select {
	case <-managerDone:
	case <-flush.C:
		g.log.Warn("replies still undelivered; giving the calls in flight a last moment", zap.Duration("flush", outboundFlush))
		cancelOut()
	}
	if g.api != nil {
		g.api.Close() // requests still waiting get 503: no answer will come
	}
	stopNATS() // hands back what is still held, so another process takes it
	<-natsDone
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	err := errors.Join(cause, eg.Wait())
	g.log.Info("gateway stopped")
	return err
}
