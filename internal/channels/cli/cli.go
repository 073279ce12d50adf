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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
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
	// Interrupts are the user's Ctrl-C presses, when the terminal hands
	// them over [none]: one during an answer stops it (like /stop) and
	// returns to the prompt; at the prompt the first says how to leave and
	// a second within ExitWindow leaves.
	Interrupts <-chan struct{}
	// ExitWindow is how soon a second Ctrl-C at the prompt must follow the
	// first to leave [2s].
	ExitWindow time.Duration
	// Clock is the time the exit window is measured on [clock.System].
	Clock clock.Clock

	stops atomic.Int64 // numbers the /stop requests, to know their replies
}

// New returns a CLI that prints to out.
func New(b Bus, out io.Writer) *CLI {
	return &CLI{b: b, out: out, SenderID: "local", ExitWindow: 2 * time.Second, Clock: clock.System{}}
}

// exitWords leave the REPL; the slash forms read like the chat commands.
var exitWords = []string{"/exit", "/quit", "exit", "quit", ":q"}

// Hint is the line the REPL prints before its first prompt.
const Hint = "Ctrl-C stops an answer; Ctrl-D or /exit leaves."

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
// so that what is printed last, and the exit status, is how it ended. A
// Ctrl-C meanwhile sends /stop; the wait then lasts until both the turn's
// final and the stop's own reply are printed, so neither shows up later at
// the next prompt.
func (c *CLI) await(ctx context.Context, command bool) error {
	var shown string // the streamed draft already on screen
	stopID := ""     // the /stop sent for a Ctrl-C, until its reply came
	var result error
	over := false // the turn (or the command) is over
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Interrupts:
			if stopID != "" || over {
				continue // stopping already
			}
			if shown != "" {
				fmt.Fprintln(c.out)
				shown = ""
			}
			stopID = "stop-" + strconv.FormatInt(c.stops.Add(1), 10)
			if err := c.b.PublishInbound(ctx, bus.InboundMessage{
				Channel: Name, ChatID: ChatID, SenderID: c.SenderID, SenderName: c.SenderID,
				Content: "/stop", MessageID: stopID, Time: time.Now(),
			}); err != nil {
				return fmt.Errorf("send /stop to agent: %w", err)
			}
		case m, ok := <-c.b.Outbound():
			if !ok {
				return ErrNoAnswer
			}
			if m.Channel != Name {
				continue
			}
			var done bool
			var err error
			if stopID != "" && m.Kind == bus.KindMessage && m.ReplyTo == stopID {
				stopID = ""
				done, err = over, result
				fmt.Fprintln(c.out, m.Content)
			} else {
				if m.Kind == bus.KindStart {
					command = false // a turn now: its final ends it
				}
				done, err = c.show(m, command, &shown)
			}
			if m.Delivered != nil {
				m.Delivered() // printed: the terminal has it
			}
			if done && !over {
				over, result = true, err
			}
			if over && stopID == "" {
				return result
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
		case *shown != "" && text != "":
			fmt.Fprintln(c.out) // a final that does not continue the draft
		}
		if text != "" || *shown != "" {
			fmt.Fprintln(c.out, text) // an empty one ends the draft's line
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

// REPL reads lines from in and asks each, until EOF (Ctrl-D), /exit, a
// second Ctrl-C at the prompt, or ctx ends.
func (c *CLI) REPL(ctx context.Context, in io.Reader, prompt string) error {
	lines, readErr := readLines(ctx, in)
	var interrupted time.Time // the last Ctrl-C at the prompt
	for {
		fmt.Fprint(c.out, prompt)
		var line string
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.out)
			return ctx.Err()
		case err := <-readErr:
			fmt.Fprintln(c.out)
			return err
		case <-c.Interrupts:
			// The terminal has thrown the half-typed line away already.
			now := c.Clock.Now()
			if !interrupted.IsZero() && now.Sub(interrupted) < c.ExitWindow {
				fmt.Fprintln(c.out)
				return nil
			}
			interrupted = now
			fmt.Fprintln(c.out, "\n(Ctrl-C again to leave, or Ctrl-D or /exit)")
			continue
		case line = <-lines:
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if slices.Contains(exitWords, line) {
			return nil
		}
		interrupted = time.Time{}
		if err := c.Ask(ctx, line); err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrNoAnswer) {
				return err
			}
			// The error was printed; the conversation goes on.
		}
	}
}

// readLines reads in line by line on its own goroutine, so that the REPL
// can wait for a line and a Ctrl-C at once. The goroutine ends at EOF (its
// error, nil for a clean EOF, is sent on the second channel) or when ctx
// has ended and a line is read; a read blocked on a terminal cannot be
// cancelled, and the process exits right after the REPL anyway.
func readLines(ctx context.Context, in io.Reader) (<-chan string, <-chan error) {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	return lines, readErr
}

// isCommand reports whether text is a chat command answered by a single
// standalone message rather than a turn.
func isCommand(text string) bool {
	_, _, ok := commands.Parse(text)
	return ok
}
