package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// agentLogFile is where `nanobot agent` logs while the REPL runs, in the
// data dir: log lines on the terminal would be spliced into the answers.
const agentLogFile = "agent.log"

func newAgentCmd(g *globalFlags, ints *interrupts) *cobra.Command {
	var message string
	var noStream bool
	var mcpWait time.Duration
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Talk to the agent from the terminal: one message with -m, or an interactive session",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		repl := message == ""
		interactive := repl && isTerminal(os.Stdin)
		var logFile *os.File
		logTo := func() io.Writer {
			if !repl {
				return nil
			}
			f, err := openAgentLog(dataDir(g))
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "nanobot: %v; logging to the terminal\n", err)
				return nil
			}
			logFile = f
			return f
		}
		defer func() {
			if logFile != nil {
				_ = logFile.Close()
			}
		}()
		return hardenedLogTo(g, logTo, func(cmd *cobra.Command, cfg *config.Config, log *zap.Logger) (err error) {
			core, err := daemon.Build(cfg, daemon.Options{Version: buildVersion(), DataDir: dataDir(g)}, log)
			if err != nil {
				return err
			}
			// Closing writes the session files out: a failure there is the
			// command's failure too.
			defer func() { err = errors.Join(err, core.Close()) }()
			// The configured MCP servers serve the terminal too; their
			// first message waits for them, within mcpWait.
			notReady, stopMCP := core.StartMCP(cmd.Context(), mcpWait)
			defer stopMCP()
			reportMCP(cmd.ErrOrStderr(), notReady, mcpWait, message != "")

			opts := daemon.TerminalOptions{
				In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Message: message, Stream: !noStream && isTerminal(os.Stdout),
			}
			if interactive {
				// Ctrl-C is the REPL's while it runs: it stops an answer,
				// and twice at the prompt leaves (then the shutdown runs
				// to its end, like after Ctrl-D).
				in, release := ints.take()
				defer release()
				opts.Interrupts = in
				fmt.Fprintln(cmd.OutOrStdout(), replHint(logFile))
			}
			err = core.RunTerminal(cmd.Context(), opts)
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
		})(cmd, args)
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

// openAgentLog opens the REPL's log file for appending (0600: a log may
// name chats and files).
func openAgentLog(dir string) (*os.File, error) {
	path := filepath.Join(dir, agentLogFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the log file: %w", err)
	}
	return f, nil
}

// replHint is the line printed before the first prompt: how to stop and
// leave, and where the log went.
func replHint(logFile *os.File) string {
	hint := daemon.TerminalHint
	if logFile != nil {
		hint += " Logs: " + logFile.Name()
	}
	return hint
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
