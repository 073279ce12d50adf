package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/config"
)

// RunGateway runs the daemon until ctx ends, then shuts down in order
// (S-F4): channels stop taking messages, the agent finishes running turns
// within gateway.shutdown_grace (the rest are cancelled; their user messages
// are already persisted), queued replies are flushed, and files are closed.
func RunGateway(ctx context.Context, cfg *config.Config, opts Options, log *zap.Logger) error {
	core, err := Build(cfg, opts, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := core.Close(); err != nil {
			log.Error("close", zap.Error(err))
		}
	}()
	ln, err := net.Listen("tcp", cfg.Gateway.Listen)
	if err != nil {
		return fmt.Errorf("gateway.listen %s: %w", cfg.Gateway.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("gateway started", zap.String("listen", ln.Addr().String()), zap.String("model", cfg.Agents.Model),
		zap.String("workspace", cfg.Agents.Workspace), zap.String("version", opts.Version))

	// agentCtx outlives ctx by the grace period, so running turns can finish.
	agentCtx, cancelAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAgent()
	var eg errgroup.Group
	agentDone := make(chan struct{})
	eg.Go(func() error {
		defer close(agentDone)
		return core.RunAgent(agentCtx)
	})
	eg.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})

	<-ctx.Done()
	log.Info("shutting down: no new messages; finishing running turns", zap.Duration("grace", cfg.Gateway.ShutdownGrace))
	core.Bus.CloseInbound()
	select {
	case <-agentDone:
	case <-time.After(cfg.Gateway.ShutdownGrace):
		log.Warn("grace period over; cancelling the turns still running")
		cancelAgent()
		<-agentDone
	}
	core.Bus.CloseOutbound()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	err = eg.Wait()
	log.Info("gateway stopped")
	return err
}
