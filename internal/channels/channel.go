// Package channels holds what every chat platform adapter shares: the Channel
// interface and its optional capabilities, the errors adapters report, and
// (in the rest of the package) the channel-neutral machinery: routing of
// outbound bus messages, chunking, streaming by edits, typing, send retries,
// access policy and inbound dedupe. Adapters live in subpackages (telegram/,
// discord/, cli/) and import this package and bus, never the agent.
package channels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Channel is a chat platform adapter.
type Channel interface {
	// Name is the channel's name on the bus ("telegram", "discord", "cli").
	Name() string
	// Run connects to the platform and publishes inbound messages to the bus
	// until ctx ends; it returns nil on a clean shutdown.
	Run(ctx context.Context) error
	// Send delivers one platform message. Its text is already rendered and
	// within the platform's limits.
	Send(ctx context.Context, m Outgoing) (Sent, error)
}

// Outgoing is one platform message to send.
type Outgoing struct {
	ChatID string
	// Text is in the platform's markup (the Renderer's output) unless Plain.
	Text  string
	Plain bool
	// ReplyTo is the platform message id being answered, if any.
	ReplyTo string
	// Metadata is the inbound message's metadata (thread, topic...).
	Metadata map[string]string
	// Media are attachments (image or file_ref parts) to upload.
	Media []llm.Part
}

// Sent identifies a delivered message, for later edits.
type Sent struct {
	ChatID    string
	MessageID string
}

// Renderer turns the agent's Markdown into the platform's markup, split into
// chunks that each fit the platform's limit, and the same as plain text for
// when the platform refuses the markup.
type Renderer interface {
	Render(markdown string) []string
	RenderPlain(markdown string) []string
}

// Chunk is one platform message of a rendered reply: its markup and the same
// text as plain, for when the platform refuses the markup.
type Chunk struct {
	Text  string
	Plain string
}

// ChunkRenderer is an optional extension of Renderer. When a renderer has it,
// the manager resends exactly the refused chunk's own plain twin after
// ErrBadMarkup; without it, the refused chunk's markup is resent as plain text.
type ChunkRenderer interface {
	RenderChunks(markdown string) []Chunk
}

// Healther is implemented by channels that can say whether they are
// connected, for /readyz. A nil error means healthy.
type Healther interface {
	Healthy() error
}

// Editor is implemented by channels that can edit a sent message; streaming
// replies need it.
type Editor interface {
	Edit(ctx context.Context, ref Sent, text string, plain bool) error
}

// Deleter is implemented by channels that can delete a sent message.
type Deleter interface {
	Delete(ctx context.Context, ref Sent) error
}

// Typer is implemented by channels that can show a typing indicator. One call
// shows it for a few seconds; the manager repeats it.
type Typer interface {
	Typing(ctx context.Context, chatID string, metadata map[string]string) error
	// TypingInterval is how often the indicator must be refreshed.
	TypingInterval() time.Duration
}

// Errors adapters return, so the shared machinery can decide what to do.
var (
	// ErrNotModified: an edit's text equals the current text. It is success.
	ErrNotModified = errors.New("message is not modified")
	// ErrBadMarkup: the platform could not parse the markup; resend as plain text.
	ErrBadMarkup = errors.New("platform could not parse the message markup")
	// ErrTokenRefused: the platform refused the bot token (401); only a
	// new token in the config fixes it.
	ErrTokenRefused = errors.New("the platform refused the bot token")
)

// RateLimitError is a 429: wait RetryAfter before the next call.
type RateLimitError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited, retry after %s: %v", e.RetryAfter, e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// UnknownOutcomeError wraps a failure after the request may have reached the
// platform (a timeout while waiting for the answer). Such a send is not
// repeated, so the user never gets the same message twice.
type UnknownOutcomeError struct{ Err error }

func (e *UnknownOutcomeError) Error() string { return "send outcome unknown: " + e.Err.Error() }
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// PermanentError wraps a refusal that retrying cannot fix (bad request,
// forbidden, chat not found).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }
