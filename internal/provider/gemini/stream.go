package gemini

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
	"github.com/nanobot-go/nanobot/internal/provider/sse"
)

// maxEvent bounds one server-sent event; Gemini sends a chunk per event, a
// few KiB at most (an inline image could be more).
const maxEvent = 32 << 20

// missingToolName names a call the server sent without a name, so the call
// still reaches the agent (which answers "unknown tool") instead of vanishing.
const missingToolName = "missing_tool_name"

// localIDPrefix marks call ids the adapter made up because Gemini sent
// none (or a duplicate); those are never sent back as Gemini ids.
const localIDPrefix = "gcall_"

// randomCallID makes an id for a call without one. It is random rather
// than a counter because sessions outlive the process and the history may
// be replayed to Anthropic, which refuses duplicate tool_use ids.
func randomCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return localIDPrefix + hex.EncodeToString(b[:])
}

// decoder turns the chunks of one streamed answer into deltas.
type decoder struct {
	p *Provider
	e *llm.Emitter
	// seen holds the call ids of this answer, which must be unique.
	seen   map[string]bool
	usage  *wireUsage
	finish string
	// calls is set once a function call was emitted: Gemini ends a turn
	// with calls by STOP too.
	calls bool
}

// read decodes the server-sent events of body until the stream ends, then
// sends the terminal. Event names carry nothing: each event is one chunk. A
// last event the body's end cut short still counts.
func (d *decoder) read(ctx, callCtx context.Context, body io.Reader) {
	r := sse.NewReader(body, maxEvent)
	for {
		ev, err := r.Next()
		if len(ev.Data) > 0 && (err == nil || errors.Is(err, io.EOF)) && !d.event(ev.Data) {
			return
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			d.end(ctx, callCtx)
			return
		case errors.Is(err, sse.ErrEventTooLarge):
			d.fail(&llm.APIError{Provider: d.p.name, Type: "invalid_stream", Message: "server-sent event too large"})
			return
		default:
			d.fail(d.p.transportError(ctx, callCtx, err, true))
			return
		}
	}
}

// event handles one chunk; false means stop reading.
func (d *decoder) event(data []byte) bool {
	var c wireResponse
	if err := json.Unmarshal(data, &c); err != nil {
		d.p.log.Warn("unreadable stream chunk", zap.String("provider", d.p.name), zap.ByteString("chunk", httpcall.Clip(data, 200)), zap.Error(err))
		d.fail(&llm.APIError{Provider: d.p.name, Type: "invalid_stream",
			Message: "server sent an event that is not valid JSON", Err: err})
		return false
	}
	if c.UsageMetadata != nil {
		d.usage = c.UsageMetadata // running totals: the last one counts
	}
	if c.Error != nil {
		d.fail(d.p.bodyError(c.Error))
		return false
	}
	if f := c.PromptFeedback; f != nil && f.BlockReason != "" {
		d.fail(&llm.APIError{Provider: d.p.name, Status: 400, Type: "PROMPT_BLOCKED",
			Message: "Gemini refused the prompt (" + f.BlockReason + ")"})
		return false
	}
	for i := range c.Candidates {
		cand := &c.Candidates[i]
		if cand.Index != 0 { // we ask for one candidate
			continue
		}
		if cand.Content != nil {
			for j := range cand.Content.Parts {
				if !d.part(&cand.Content.Parts[j]) {
					return false
				}
			}
		}
		if cand.FinishReason != "" {
			d.finish = cand.FinishReason
		}
	}
	return true
}

// part turns one part into deltas. A signature stays with what it signed:
// a thought, a function call; one on a plain text part (or alone, on an
// empty text) becomes a thinking part of its own with no text, right after
// the text, so it is replayed and never shown.
func (d *decoder) part(pt *wirePart) bool {
	sig := pt.ThoughtSignature
	switch {
	case pt.FunctionCall != nil:
		return d.call(pt.FunctionCall, sig)
	case pt.Text != nil && pt.Thought:
		return d.e.Emit(llm.Delta{Kind: llm.DeltaThinking, Text: *pt.Text, Signature: sig})
	case pt.Text != nil:
		if *pt.Text != "" && !d.e.Emit(llm.Delta{Kind: llm.DeltaText, Text: *pt.Text}) {
			return false
		}
	case sig == "":
		d.p.log.Debug("skipping a part the adapter does not use", zap.String("provider", d.p.name))
		return true
	}
	if sig != "" {
		return d.e.Emit(llm.Delta{Kind: llm.DeltaThinking, Signature: sig})
	}
	return true
}

// call emits one whole function call: Gemini streams calls complete, never
// in fragments.
func (d *decoder) call(fc *wireFunctionCall, sig string) bool {
	id := fc.ID
	if id == "" || d.seen[id] || strings.HasPrefix(id, localIDPrefix) {
		id = d.p.newID()
	}
	d.seen[id] = true
	d.calls = true
	name := fc.Name
	if name == "" {
		name = missingToolName
	}
	args := strings.TrimSpace(string(fc.Args))
	if args == "" || args == "null" {
		args = "{}"
	}
	return d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallStart, CallID: id, Name: name, Signature: sig}) &&
		d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: id, Args: args}) &&
		d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: id})
}

// fail ends the stream with err. The usage the chunks reported so far
// goes out first: Gemini counted the prompt (and what it streamed) when it
// sent them, and bills a stream that breaks afterwards, so the usage
// ledger records it as Anthropic's is (internal/provider/anthropic).
func (d *decoder) fail(err error) {
	if d.usage != nil {
		d.e.Emit(llm.Delta{Kind: llm.DeltaUsage, Usage: d.usage.llm()})
	}
	d.e.Fail(err)
}

// end handles the end of the body: done when the server gave a finish
// reason, otherwise the stream was cut short.
func (d *decoder) end(ctx, callCtx context.Context) {
	if d.finish == "" {
		switch {
		case ctx.Err() != nil, callCtx.Err() != nil:
			d.fail(d.p.transportError(ctx, callCtx, io.ErrUnexpectedEOF, true))
		default:
			d.fail(fmt.Errorf("gemini %s: stream ended without a finish reason: %w", d.p.name, llm.ErrTruncated))
		}
		return
	}
	if d.usage != nil && !d.e.Emit(llm.Delta{Kind: llm.DeltaUsage, Usage: d.usage.llm()}) {
		return
	}
	d.e.Emit(llm.Delta{Kind: llm.DeltaDone, StopReason: stopReason(d.finish, d.calls)})
}

// llm converts Gemini's counts: input without the cached part (which is
// CacheRead), output with the thoughts (billed as output, as OpenAI counts
// reasoning), and the thoughts again as Reasoning.
func (u *wireUsage) llm() llm.Usage {
	cached := min(u.CachedContentTokenCount, u.PromptTokenCount)
	return llm.Usage{
		InputTokens:     u.PromptTokenCount - cached + u.ToolUsePromptTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadTokens: cached,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

// stopReason normalises Gemini's finishReason
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func stopReason(r string, calls bool) llm.StopReason {
	switch r {
	case "STOP":
		if calls {
			return llm.StopToolCalls
		}
		return llm.StopEnd
	case "MAX_TOKENS":
		return llm.StopLength
	case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return llm.StopSafety
	case "RECITATION":
		return llm.StopRecitation
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL":
		return llm.StopMalformedCall
	}
	return llm.StopOther // LANGUAGE, OTHER, TOO_MANY_TOOL_CALLS, …
}
