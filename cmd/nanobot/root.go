package main

import (
	"github.com/spf13/cobra"
)

// globalFlags are the flags every subcommand shares.
type globalFlags struct {
	configPath string
	logLevel   string
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "nanobot",
		Short:         "A small, fast personal AI assistant for Telegram, Discord and the terminal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&g.configPath, "config", "c", "", "config file (default ~/.nanobot/config.yaml)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn, error (overrides log.level)")
	root.AddCommand(
		newOnboardCmd(g),
		newAgentCmd(g),
		newGatewayCmd(g),
		newStatusCmd(g),
		newDoctorCmd(g),
		newHealthcheckCmd(g),
		newPairingCmd(g),
		newVersionCmd(),
	)
	return root
}
