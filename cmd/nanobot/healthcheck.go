package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/daemon"
)

// newHealthcheckCmd probes the running gateway's /healthz (or /readyz) on
// gateway.listen. It exists for container HEALTHCHECKs: the distroless
// image has no curl or wget.
func newHealthcheckCmd(g *globalFlags) *cobra.Command {
	var ready bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Probe the running gateway's /healthz (or /readyz with --ready); exit 0 when it answers 200",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.LoadConfig(g.configPath)
			if err != nil {
				return err
			}
			path := "/healthz"
			if ready {
				path = "/readyz"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			body, err := daemon.Probe(ctx, cfg.Gateway.Listen, path)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), body)
			return nil
		},
	}
	cmd.Flags().BoolVar(&ready, "ready", false, "probe /readyz (channels connected, model provider answering) instead of /healthz")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}
