package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/nanobot-go/nanobot/internal/httpguard"
)

// Stop deadlines of the gateway's stages (see stages), besides the grace
// of the running turns (gateway.shutdown_grace, which the intake's stop
// counts against) and the outbound flush (outboundFlush). Each only bounds
// a part that hangs: the parts stop at once when nothing is in flight.
// With outboundDrain and Core.Close's wait for abandoned tool calls (5 s)
// they bound the shutdown to gateway.shutdown_grace + 24 s
// (docs/operations.md#shutdown).
const (
	intakeStop   = 5 * time.Second
	mcpStop      = 2 * time.Second
	apiStop      = 1 * time.Second
	busStop      = 3 * time.Second
	listenerStop = 1 * time.Second
)

// Run serves until ctx ends, then shuts down in order
// (docs/operations.md#shutdown): the stages start in the order of
// g.stages and stop in reverse, each within its deadline. /readyz turns
// false and the channels stop taking messages; the agent finishes running
// and queued turns within gateway.shutdown_grace, counted from the signal
// (past it the rest are cancelled: a started turn keeps its user message
// and tells the user, a message not started yet stays unacknowledged, so
// its channel delivers it again after the restart); queued replies are
// delivered (bounded by outboundFlush and outboundDrain); the bus, the
// listener and the files are closed. It returns nil after a signal. A
// channel that cannot start (its token refused) or stops is down with its
// reason while the rest serves (channelrun.go); only the listener or the
// bus failing stops the daemon.
func (g *Gateway) Run(ctx context.Context) error {
	defer func() {
		if err := g.core.Close(); err != nil {
			g.log.Error("close", zap.Error(err))
		}
	}()
	if err := g.migrateJobs(); err != nil {
		return err
	}
	// A fatal error (the listener, the bus, the schedulers) ends intake
	// like a signal does.
	ctx, stopIntake := context.WithCancelCause(ctx)
	defer stopIntake(nil)
	l := &lifecycle{stages: g.stages(ctx, stopIntake), log: g.log}
	if err := l.start(); err != nil {
		return err
	}
	<-ctx.Done()
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		cause = nil // a signal: a clean shutdown
	}
	g.log.Info("shutting down: taking no new messages, finishing running turns", zap.Duration("grace", g.cfg.Gateway.ShutdownGrace))
	err := errors.Join(cause, l.stop())
	g.log.Info("gateway stopped")
	return err
}

// stages are the gateway's parts in the order they start; they stop in
// reverse. intake is the context whose end starts the shutdown; fatal
// ends it with a cause. What outlives what:
//   - the listener outlives everything: probes and webhooks are answered
//     until the end;
//   - the bus (NATS, the usage ledger's sync, the budget's warnings, the
//     pairing view) outlives the agent and the manager: their last
//     replies and acknowledgements travel on it;
//   - the API's waiting requests are refused once no reply can come;
//   - the outbound manager delivers what the agent's last turns queued;
//   - MCP servers serve the turns until the agent is done;
//   - the agent finishes the turns it has within the grace;
//   - the intake (channels, the API's requests, the schedulers, the
//     provider probes) stops first.
func (g *Gateway) stages(intake context.Context, fatal context.CancelCauseFunc) []stage {
	// The stages past intake run on contexts of their own: they outlive
	// the signal until their turn to stop.
	detached := context.WithoutCancel(intake)
	listener, bus, out := newWork(detached), newWork(detached), newWork(detached)
	mcp, agent := newWork(detached), newWork(detached)
	var srv *http.Server
	var in sync.WaitGroup
	return []stage{
		{name: "listener", deadline: listenerStop,
			start: func() error {
				var serve func(context.Context) error
				var err error
				if srv, serve, err = g.listen(fatal); err == nil {
					listener.Go(serve)
				}
				return err
			},
			stop: func(ctx context.Context) error {
				if err := srv.Shutdown(ctx); err != nil {
					// Connections still busy at the deadline (a slow client):
					// they are cut, as a supervisor's kill would.
					g.log.Warn("closing the HTTP connections still open", zap.Error(err))
					_ = srv.Close()
				}
				return listener.eg.Wait() // Serve returns once shut down or closed
			}},
		{name: "bus", deadline: busStop,
			start: func() error {
				if g.core.NATS != nil {
					bus.Go(func(ctx context.Context) error {
						if err := g.core.NATS.Run(ctx); err != nil {
							fatal(err)
							return err
						}
						return nil
					})
				}
				// The ledger syncs its records, and the budget's warnings go
				// out, until the bus stops: the last turns' calls are
				// recorded by then.
				bus.Go(g.core.Usage.Run)
				if g.core.usageShared != nil {
					bus.Go(g.core.usageShared.Run)
				}
				bus.Go(g.core.warnings.Run)
				if g.runPairing != nil {
					// Its view is read until the channels stop, and its watch
					// rides on the bus's connection.
					bus.Go(g.runPairing)
				}
				return nil
			},
			// Stopping hands back what is still held, so another process
			// takes it.
			stop: bus.stopNow},
		{name: "api", deadline: apiStop,
			stop: func(context.Context) error {
				if g.api != nil {
					g.api.Close() // requests still waiting get 503: no answer will come
				}
				return nil
			}},
		{name: "outbound", deadline: outboundFlush,
			start: func() error {
				if g.runs(RoleChannels) {
					out.Go(g.manager.Run)
				}
				return nil
			},
			// The manager delivers what is queued, then returns.
			stop: out.stopAfter(func() { g.core.Bus.CloseOutbound() }, func() {
				g.log.Warn("replies still undelivered; giving the calls in flight a last moment", zap.Duration("flush", outboundFlush))
			})},
		{name: "mcp", deadline: mcpStop,
			start: func() error {
				if g.runs(RoleAgent) {
					mcp.Go(g.core.MCP.Run)
				}
				return nil
			},
			// No turn is left to call their tools; Run stops and reaps them.
			stop: mcp.stopNow},
		{name: "agent", deadline: g.cfg.Gateway.ShutdownGrace, fromSignal: true,
			start: func() error {
				if g.runs(RoleAgent) {
					agent.Go(g.core.RunAgent)
				}
				return nil
			},
			// The agent serves what is queued until the inbound side closes.
			stop: agent.stopAfter(func() { g.core.Bus.CloseInbound() }, func() {
				g.log.Warn("grace period over; cancelling the turns still running")
			})},
		{name: "intake", deadline: intakeStop,
			start: func() error {
				for _, c := range g.channels {
					in.Go(func() { c.run(intake) })
				}
				if g.runs(RoleAgent) {
					// Probes the providers in use once, and again while one is down.
					in.Go(func() { _ = g.core.Providers.Run(intake) })
				}
				// The API takes requests like a channel takes messages.
				if g.api != nil {
					in.Go(func() { _ = g.api.Run(intake) })
				}
				g.runSchedule(intake, &in, fatal)
				in.Go(func() { newStartRelease(func() bool { return g.health.Ready().Ready }).run(intake) })
				return nil
			},
			// The channels hand over what they already received; the agent
			// keeps consuming meanwhile, so this cannot block on a full
			// queue.
			stop: func(ctx context.Context) error {
				g.health.Drain()
				fatal(nil) // already ended by the signal, or stopping after a failed start
				done := make(chan struct{})
				go func() { in.Wait(); close(done) }()
				select {
				case <-done:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}},
	}
}

// listen opens the listener (gateway.listen, or opts.Listener) behind the
// listener's defences; serve serves the mux on it until srv shuts down.
// The listener failing ends the daemon through fatal.
func (g *Gateway) listen(fatal context.CancelCauseFunc) (srv *http.Server, serve func(context.Context) error, err error) {
	ln := g.opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", g.cfg.Gateway.Listen); err != nil {
			return nil, nil, fmt.Errorf("gateway.listen %s: %w", g.cfg.Gateway.Listen, err)
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
	srv = &http.Server{
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
	serve = func(context.Context) error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			// Without probes and webhooks the daemon is blind: stop, and
			// report it as the cause.
			fatal(fmt.Errorf("http listener %s: %w", ln.Addr(), err))
		}
		return nil
	}
	return srv, serve, nil
}
