package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/daemon"
)

// newWebCmd manages the web page's login token
// (docs/web.md#access-closed-by-default). The token file sits next to the
// config with mode 0600; the running gateway reads it at every login, so a
// rotation takes effect at once.
func newWebCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "web", Short: "The browser chat and control panel (docs/web.md)"}
	var rotate bool
	tok := &cobra.Command{
		Use:   "token",
		Short: "Print the web login token (--rotate: replace it)",
		Long: "Prints the token that logs a browser into the web page (channels.web.token when set, else the file\n" +
			"web-token next to the config). --rotate writes a new one; the old one stops working at once, and\n" +
			"browsers already logged in stay so until their session ends or the gateway restarts.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rotate {
				t, err := daemon.RotateWebToken(dataDir(g))
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), t)
				fmt.Fprintf(cmd.ErrOrStderr(), "new token written to %s; the old one no longer logs in\n", daemon.WebTokenPath(dataDir(g)))
				return nil
			}
			t, err := daemon.WebToken(dataDir(g))
			if err != nil {
				return fmt.Errorf("%w (the gateway also creates it when it first starts)", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), t)
			return nil
		},
	}
	tok.Flags().BoolVar(&rotate, "rotate", false, "replace the token with a new random one")
	cmd.AddCommand(tok)
	return cmd
}
