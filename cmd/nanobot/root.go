package main

import (
	"os"

	"github.com/spf13/cobra"
)

// configEnv names the environment variable that sets --config's default.
const configEnv = "NANOBOT_CONFIG"

// globalFlags are the flags every subcommand shares.
type globalFlags struct {
	configPath string
	logLevel   string
}

// newRootCmd builds the commands; ints is where a command takes Ctrl-C over.
func newRootCmd(ints *interrupts) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "nanobot",
		Short:         "A small, fast personal AI assistant for your chat apps, the browser and the terminal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// NANOBOT_CONFIG lets a container image or a unit file choose the
	// config once for every subcommand (`docker run IMAGE doctor`).
	root.PersistentFlags().StringVarP(&g.configPath, "config", "c", os.Getenv(configEnv),
		"config file (default $"+configEnv+", else ~/.nanobot/config.yaml)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn, error (overrides log.level)")
	root.AddCommand(
		newOnboardCmd(g),
		newAgentCmd(g, ints),
		newGatewayCmd(g),
		newStatusCmd(g),
		newDoctorCmd(g),
		newHealthcheckCmd(g),
		newPairingCmd(g),
		newWebCmd(g),
		newUsageCmd(g),
		newVersionCmd(),
	)
	return root
}
