package daemon

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/mcp"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// newMCP prepares the MCP servers of tools.mcp_servers, whose tools go into
// reg once the manager runs (the gateway's Run, or StartMCP). It does no I/O.
func newMCP(cfg *config.Config, reg *tools.Registry, version string, secrets []string, log *zap.Logger) *mcp.Manager {
	return mcp.NewManager(cfg.Tools.MCPServers, reg, mcp.Options{
		Workspace: cfg.Agents.Workspace, Secrets: secrets, Version: version,
	}, log)
}

// StartMCP runs the MCP servers outside the gateway (the terminal's
// `nanobot agent`), which runs them itself. It starts them all, waits at
// most wait for each one's first connection attempt, and returns the
// servers not connected by then (their tools come later, if they connect,
// or not at all) and stop, which closes every connection, stops and reaps
// the stdio servers and removes their tools. Call stop once the agent is
// done; it waits for the manager to return.
func (c *Core) StartMCP(ctx context.Context, wait time.Duration) (notReady []mcp.Status, stop func()) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var running sync.WaitGroup
	running.Go(func() {
		if err := c.MCP.Run(runCtx); err != nil {
			c.log.Error("mcp servers", zap.Error(err))
		}
	})
	stop = func() {
		cancel()
		running.Wait()
	}
	wctx, done := context.WithTimeout(ctx, wait)
	defer done()
	return c.MCP.WaitStarted(wctx), stop
}
