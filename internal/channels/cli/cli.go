// Package cli is the terminal channel (README.md#commands): `nanobot agent -m
// TEXT` asks one question and prints the answer; `nanobot agent` is an
// interactive REPL. Both go through the same bus, agent loop and sessions as
// the chat channels, under the session key "cli:local". In this mode the CLI
// is the only channel, so it reads the bus's outbound queue itself.
package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/commands"
)

// Name is the channel name and ChatID the chat of the terminal user.
const (
	Name   = "cli"
	ChatID = "local"
)

// Bus is the part of the bus the CLI uses.
type Bus interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
	Outbound() <-chan bus.OutboundMessage
}

// CLI talks to the agent from a terminal.
type CLI struct {
	b   Bus
	out io.Writer
	// Stream prints the reply as it grows (for terminals); otherwise only
	// the final text is printed, which suits scripts.
	Stream bool
	// SenderID identifies the local user [local].
	SenderID string
}

// New returns a CLI that prints to out.
func New(b Bus, out io.Writer) *CLI {
	return &CLI{b: b, out: out, SenderID: "local"}
}

// ErrNoAnswer means the bus closed before the turn's final message arrived.
var ErrNoAnswer = errors.New("no answer: the agent stopped before replying")

// ReplyError is returned when the agent answered with an error message; the
// message was printed already.
type ReplyError struct{ Text string }

func (e *ReplyError) Error() string { return "agent: " + e.Text }

// Ask sends text and prints everything the agent sends back until the turn
// ends. An error answer from the agent is printed and returned as an error.
func (c *CLI) Ask(ctx context.Context, text string) error {
	err := c.b.PublishInbound(ctx, bus.InboundMessage{
		Channel: Name, ChatID: ChatID, SenderID: c.SenderID, SenderName: c.SenderID,
		Content: text, Time: time.Now(),
	})
	if err != nil {
		return fmt.Errorf("send to agent: %w", err)
	}
	return c.await(ctx, isCommand(text))
}

// await prints outbound messages until the turn's final message (or, for a
// command, its single reply). A command that takes a while answers like a
// turn (a start, notes, a final with the outcome): then its final ends it,
// so that what is printed last, and the exit status, is how it ended.
func (c *CLI) await(ctx context.Context, command bool) error {
	var shown string // the streamed draft already on screen
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-c.b.Outbound():
			if !ok {
				return ErrNoAnswer
			}
			if m.Channel != Name {
				continue
			}
			if m.Kind == bus.KindStart {
				command = false // a turn now: its final ends it
			}
			done, err := c.show(m, command, &shown)
			if m.Delivered != nil {
				m.Delivered() // printed: the terminal has it
			}
			if done {
				return err
			}
		}
	}
}

// show prints one outbound message and reports whether the turn (or the
// command) is over.
func (c *CLI) show(m bus.OutboundMessage, command bool, shown *string) (done bool, err error) {
	switch m.Kind {
	case bus.KindDraft:
		if !c.Stream {
			return false, nil
		}
		if !strings.HasPrefix(m.Content, *shown) { // a new draft (next call or a retry)
			fmt.Fprintln(c.out)
			*shown = ""
		}
		fmt.Fprint(c.out, m.Content[len(*shown):])
		*shown = m.Content
	case bus.KindStatus:
		if c.Stream && m.Content != "" {
			if *shown != "" {
				fmt.Fprintln(c.out)
				*shown = ""
			}
			fmt.Fprintln(c.out, m.Content)
		}
	case bus.KindMessage:
		if *shown != "" { // a note in the middle of a streamed line gets its own
			fmt.Fprintln(c.out)
			*shown = ""
		}
		fmt.Fprintln(c.out, m.Content)
		if command {
			return true, replyErr(m)
		}
	case bus.KindFinal:
		text := m.Content
		switch {
		case *shown != "" && strings.HasPrefix(text, *shown):
			text = text[len(*shown):]
		case *shown != "":
			fmt.Fprintln(c.out)
		}
		if text != "" || *shown != "" {
			fmt.Fprintln(c.out, text)
		}
		return true, replyErr(m)
	}
	return false, nil
}

func replyErr(m bus.OutboundMessage) error {
	if m.IsError {
		return &ReplyError{Text: m.Content}
	}
	return nil
}

// REPL reads lines from in and asks each, until EOF, "exit" or ctx ends.
func (c *CLI) REPL(ctx context.Context, in io.Reader, prompt string) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for {
		fmt.Fprint(c.out, prompt)
		if !sc.Scan() {
			fmt.Fprintln(c.out)
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case "exit", "quit", ":q":
			return nil
		}
		if err := c.Ask(ctx, line); err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrNoAnswer) {
				return err
			}
			// The error was printed; the conversation goes on.
		}
	}
}

// isCommand reports whether text is a chat command answered by a single
// standalone message rather than a turn.
func isCommand(text string) bool {
	_, _, ok := commands.Parse(text)
	return ok
}
