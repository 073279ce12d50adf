package daemon

import (
	"context"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/channels/cli"
	"github.com/nanobot-go/nanobot/internal/mcp"
)

// TerminalOptions are what `nanobot agent` passes to RunTerminal.
type TerminalOptions struct {
	In  io.Reader
	Out io.Writer
	// Message, when set, is sent alone: its reply is printed and the run
	// ends. Otherwise the terminal is a REPL on In.
	Message string
	// Stream prints the reply as it streams (a terminal), not only whole.
	Stream bool
	// Interrupts are the user's Ctrl-C presses, for the REPL (cli.CLI's
	// Interrupts); nil leaves Ctrl-C to the caller.
	Interrupts <-chan struct{}
}

// TerminalHint is the line the REPL's caller prints before the first prompt.
const TerminalHint = cli.Hint

// ReplyError is what RunTerminal returns when the agent answered with an
// error message, which was printed already.
type ReplyError = cli.ReplyError

// MCPStatus is one MCP server's state, as StartMCP reports the servers not
// ready; MCPConnecting is the state of one still starting.
type MCPStatus = mcp.Status

const MCPConnecting = mcp.StateConnecting

// RunTerminal runs the agent with the terminal as its only channel, until
// the one message is answered, In ends or ctx ends.
func (c *Core) RunTerminal(ctx context.Context, o TerminalOptions) error {
	term := cli.New(c.Bus, o.Out)
	term.Stream = o.Stream
	term.Interrupts = o.Interrupts
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return c.RunAgent(ctx) })
	eg.Go(func() error {
		// Closing intake lets the agent finish and return.
		defer c.Bus.CloseInbound()
		if o.Message != "" {
			return term.Ask(ctx, o.Message)
		}
		return term.REPL(ctx, o.In, "you> ")
	})
	return eg.Wait()
}
