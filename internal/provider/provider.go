// Package provider turns route names into model calls: it resolves a route
// ("provider/model" or a name under routes) to a configured endpoint, streams
// the call through that endpoint's adapter (openai/, anthropic/, gemini/),
// accumulates the deltas into one assistant message and records which route
// answered.
package provider

import (
	"context"
	"iter"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Streamer is one configured LLM endpoint speaking one wire API. Adapters in
// the subpackages implement it.
type Streamer interface {
	// Stream sends req and yields its deltas: a start (with Meta naming the
	// provider, api and model), content deltas, then exactly one terminal.
	// Every failure, including one before any byte was received, is an error
	// terminal carrying an *llm.APIError or llm.ErrTruncated where they apply.
	// Seq numbers start at 1 and increase. Stopping the iteration early (the
	// consumer returns false) cancels the request.
	Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta]
}
