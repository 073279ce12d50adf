package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newOnboardCmd(g *globalFlags) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "onboard",
		Short: "Write a starter config and create the workspace (never overwrites a file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			path := g.configFile()
			if ws == "" {
				ws = filepath.Join(filepath.Dir(path), "workspace")
			}
			abs, err := filepath.Abs(ws)
			if err != nil {
				return err
			}
			switch err := config.WriteStarter(path, config.StarterYAML(abs)); {
			case errors.Is(err, fs.ErrExist):
				fmt.Fprintf(out, "config:    %s (exists, left as is)\n", path)
			case err != nil:
				return err
			default:
				fmt.Fprintf(out, "config:    %s (created)\n", path)
			}
			tokenPath := daemon.WebTokenPath(filepath.Dir(path))
			switch made, err := daemon.EnsureWebToken(filepath.Dir(path)); {
			case err != nil:
				return err
			case made:
				fmt.Fprintf(out, "web token: %s (created, mode 0600; `nanobot web token` prints it)\n", tokenPath)
			default:
				fmt.Fprintf(out, "web token: %s (exists, left as is)\n", tokenPath)
			}
			created, err := daemon.InstallWorkspace(abs)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "workspace: %s (%d files created)\n", abs, len(created))
			for _, c := range created {
				fmt.Fprintf(out, "  + %s\n", c)
			}
			if isTTY(os.Stdin) {
				// A person at a terminal: ask for the key now (onboard_setup.go).
				if err := promptSetup(cmd.Context(), cmd.InOrStdin(), out, path); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "\nNext:\n  export OPENAI_API_KEY=...   (or edit %s)\n  nanobot agent -m \"hello\"\n  nanobot gateway             (after enabling a channel; the web page is on http://127.0.0.1:18790/)\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "workspace directory (default: next to the config, ~/.nanobot/workspace)")
	return cmd
}
