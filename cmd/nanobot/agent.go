package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/channels/cli"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newAgentCmd(g *globalFlags) *cobra.Command {
	var message string
	var noStream bool
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Talk to the agent from the terminal: one message with -m, or an interactive session",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfig(g)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			core, err := daemon.Build(cfg, daemon.Options{Version: buildVersion(), DataDir: dataDir(g)}, log)
			if err != nil {
				return err
			}
			defer core.Close()

			term := cli.New(core.Bus, cmd.OutOrStdout())
			term.Stream = !noStream && isTerminal(os.Stdout)
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			eg, ctx := errgroup.WithContext(ctx)
			eg.Go(func() error { return core.RunAgent(ctx) })
			eg.Go(func() error {
				// Closing intake lets the agent finish and return.
				defer core.Bus.CloseInbound()
				if message != "" {
					return term.Ask(ctx, message)
				}
				return term.REPL(ctx, cmd.InOrStdin(), "you> ")
			})
			err = eg.Wait()
			if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
				return nil // interrupted by the user
			}
			var replyErr *cli.ReplyError
			if errors.As(err, &replyErr) {
				return exitError{code: 1} // the agent's message was printed already
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "send one message, print the reply and exit")
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "print only the final reply, not the text as it streams")
	return cmd
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
