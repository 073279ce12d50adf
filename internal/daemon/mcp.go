package daemon

import (
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/mcp"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// newMCP prepares the MCP servers of tools.mcp_servers, whose tools go into
// reg once the gateway runs the manager. It does no I/O.
func newMCP(cfg *config.Config, reg *tools.Registry, version string, log *zap.Logger) *mcp.Manager {
	return mcp.NewManager(cfg.Tools.MCPServers, reg, mcp.Options{
		Workspace: cfg.Agents.Workspace, Secrets: cfg.Secrets(), Version: version,
	}, log)
}
