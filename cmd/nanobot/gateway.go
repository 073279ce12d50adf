package main

import (
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newGatewayCmd(g *globalFlags) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the daemon: the agent plus the enabled chat channels, until SIGINT/SIGTERM",
		Args:  cobra.NoArgs,
		RunE: hardened(g, func(cmd *cobra.Command, cfg *config.Config, log *zap.Logger) error {
			return daemon.RunGateway(cmd.Context(), cfg, daemon.Options{Version: buildVersion(), DataDir: dataDir(g), Role: role}, log)
		}),
	}
	cmd.Flags().StringVar(&role, "role", daemon.RoleAll,
		"what this process runs: all, channels (chat adapters and HTTP, no model calls) or agent (a worker); "+
			"channels and agent need bus.backend: nats (docs/scale-out.md)")
	return cmd
}
