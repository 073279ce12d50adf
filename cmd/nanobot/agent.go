package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

// defaultMCPWait bounds how long `nanobot agent` waits for the MCP servers
// before the first message: long enough for a stdio server started with
// npx or uvx, short enough that a broken one cannot hold the terminal.
const defaultMCPWait = 20 * time.Second

func newAgentCmd(g *globalFlags) *cobra.Command {
	var message string
	var noStream bool
	var mcpWait time.Duration
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Talk to the agent from the terminal: one message with -m, or an interactive session",
		Args:  cobra.NoArgs,
		RunE: hardened(g, func(cmd *cobra.Command, cfg *config.Config, log *zap.Logger) error {
			core, err := daemon.Build(cfg, daemon.Options{Version: buildVersion(), DataDir: dataDir(g)}, log)
			if err != nil {
				return err
			}
			defer core.Close()
			// The configured MCP servers serve the terminal too; their
			// first message waits for them, within mcpWait.
			notReady, stopMCP := core.StartMCP(cmd.Context(), mcpWait)
			defer stopMCP()
			reportMCP(cmd.ErrOrStderr(), notReady, mcpWait, message != "")

			err = core.RunTerminal(cmd.Context(), daemon.TerminalOptions{
				In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Message: message, Stream: !noStream && isTerminal(os.Stdout),
			})
			if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
				return nil // interrupted by the user
			}
			var replyErr *daemon.ReplyError
			if errors.As(err, &replyErr) {
				if advice := core.ModelAdvice(); advice != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "nanobot: "+advice)
				}
				return exitError{code: 1} // the agent's message was printed already
			}
			return err
		}),
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "send one message, print the reply and exit")
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "print only the final reply, not the text as it streams")
	cmd.Flags().DurationVar(&mcpWait, "mcp-wait", defaultMCPWait, "how long to wait for the MCP servers to start before the first message (0: do not wait)")
	return cmd
}

// reportMCP tells the user, on stderr, which MCP servers are not ready, so
// a missing tool is not a mystery.
func reportMCP(w io.Writer, notReady []daemon.MCPStatus, wait time.Duration, oneShot bool) {
	missing := "its tools are missing until it connects (/status shows it)"
	if oneShot {
		missing = "its tools are not available for this message"
	}
	for _, st := range notReady {
		switch st.State {
		case daemon.MCPConnecting:
			fmt.Fprintf(w, "MCP server %s (%s) is still starting after %s: %s.\n", st.Name, st.Transport, wait, missing)
		default:
			fmt.Fprintf(w, "MCP server %s (%s) did not start: %s; %s.\n", st.Name, st.Transport, clip(st.LastError, 200), missing)
		}
	}
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
