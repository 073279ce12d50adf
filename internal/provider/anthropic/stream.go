package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/sse"
)

// maxEvent bounds one line of the stream (32 MiB, the official SDK's bound);
// an event is a line of JSON, a few hundred bytes.
const maxEvent = 32 << 20

// decoder turns the Messages stream events into deltas. Anthropic numbers
// content blocks by index; the decoder remembers what each block is so a
// delta or stop lands on the right tool call.
type decoder struct {
	p      *Provider
	e      *llm.Emitter
	blocks []block
	// usage holds the largest count seen per field: message_start and
	// message_delta both report cumulative counts, so summing would double.
	usage llm.Usage
	stop  string
	// ev is the event being decoded, reused.
	ev wireEvent
}

type block struct {
	kind   string // "text", "thinking", "redacted_thinking", "tool_use", or "" for blocks we skip
	callID string
	// input is the tool_use input given with content_block_start; it is only
	// used when no input_json_delta follows.
	input   []byte
	hasArgs bool
	closed  bool
}

// read decodes the events of resp's body until a terminal went out or the
// consumer stopped (then e.Done() holds), or the stream ended without
// message_stop: the error says why (an `event: error` as *llm.APIError, an
// event that is not JSON, a broken connection), nil for a clean end.
//
// Events are told apart by their data's type; the event name only sorts out
// pings, errors and nameless events, which carry nothing. An event the
// body's end cut short (no blank line after it) is dropped, as the SSE
// standard says.
func (d *decoder) read(resp *http.Response) error {
	r := sse.NewReader(resp.Body, maxEvent)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch ev.Name {
		case "", "ping":
			continue
		case "error":
			return d.p.apiError(resp, ev.Data)
		}
		if len(ev.Data) == 0 {
			continue
		}
		d.ev = wireEvent{}
		if err := json.Unmarshal(ev.Data, &d.ev); err != nil {
			return err
		}
		if !d.event(&d.ev) {
			return nil
		}
	}
}

// event handles one stream event; false means stop reading (a terminal was
// sent or the consumer stopped).
func (d *decoder) event(ev *wireEvent) bool {
	switch ev.Type {
	case "message_start":
		if m := ev.Message.Model; m != "" {
			d.e.SetModel(m)
		}
		d.noteUsage(ev.Message.Usage)
		return d.e.Start()
	case "content_block_start":
		return d.blockStart(ev)
	case "content_block_delta":
		return d.blockDelta(ev)
	case "content_block_stop":
		return d.blockStop(ev)
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			d.stop = r
		}
		d.noteUsage(ev.Usage)
		return true
	case "message_stop":
		return d.finish()
	default:
		// Event types added after this adapter was written are skipped, as
		// Anthropic's versioning policy asks of clients.
		return true
	}
}

func (d *decoder) noteUsage(u wireUsage) {
	d.usage.InputTokens = max(d.usage.InputTokens, u.InputTokens)
	d.usage.OutputTokens = max(d.usage.OutputTokens, u.OutputTokens)
	d.usage.CacheReadTokens = max(d.usage.CacheReadTokens, u.CacheReadInputTokens)
	d.usage.CacheWriteTokens = max(d.usage.CacheWriteTokens, u.CacheCreationInputTokens)
}

func (d *decoder) blockStart(ev *wireEvent) bool {
	i := ev.Index
	if i < 0 || i > len(d.blocks) || (i < len(d.blocks) && d.blocks[i].kind != "") {
		return d.protocolError("content_block_start for index %d out of order", i)
	}
	if i == len(d.blocks) {
		d.blocks = append(d.blocks, block{})
	}
	cb := ev.ContentBlock
	b := &d.blocks[i]
	switch cb.Type {
	case "text":
		b.kind = "text"
		return cb.Text == "" || d.e.Emit(llm.Delta{Kind: llm.DeltaText, Text: cb.Text})
	case "thinking":
		b.kind = "thinking"
		if cb.Thinking == "" && cb.Signature == "" {
			return true
		}
		return d.e.Emit(llm.Delta{Kind: llm.DeltaThinking, Text: cb.Thinking, Signature: cb.Signature})
	case "redacted_thinking":
		b.kind = "redacted_thinking"
		return d.e.Emit(llm.Delta{Kind: llm.DeltaThinking, Text: cb.Data, Redacted: true})
	case "tool_use":
		// A missing or repeated id is the Accumulator's to replace
		// (llm.Accumulator); a call without a name cannot be answered.
		if cb.Name == "" {
			return d.protocolError("tool_use block %d without a name", i)
		}
		b.kind, b.callID = "tool_use", cb.ID
		b.input = cb.Input
		return d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallStart, CallID: cb.ID, Name: cb.Name})
	default:
		// Server-side tool blocks and future kinds carry nothing the
		// provider-neutral message can hold.
		b.kind = "skip"
		d.p.log.Debug("skipping content block", zap.String("type", cb.Type))
		return true
	}
}

func (d *decoder) open(i int, kind ...string) (*block, bool) {
	if i < 0 || i >= len(d.blocks) || d.blocks[i].closed {
		return nil, false
	}
	b := &d.blocks[i]
	for _, k := range kind {
		if b.kind == k {
			return b, true
		}
	}
	return b, b.kind == "skip"
}

func (d *decoder) blockDelta(ev *wireEvent) bool {
	i := ev.Index
	delta := ev.Delta
	switch delta.Type {
	case "text_delta":
		return d.fragment(i, "text", delta.Type, delta.Text, llm.Delta{Kind: llm.DeltaText, Text: delta.Text})
	case "thinking_delta":
		return d.fragment(i, "thinking", delta.Type, delta.Thinking, llm.Delta{Kind: llm.DeltaThinking, Text: delta.Thinking})
	case "signature_delta":
		return d.fragment(i, "thinking", delta.Type, delta.Signature, llm.Delta{Kind: llm.DeltaThinking, Signature: delta.Signature})
	case "input_json_delta":
		b, ok := d.open(i, "tool_use")
		if !ok {
			return d.protocolError("input_json_delta for block %d", i)
		}
		if b.kind == "skip" || delta.PartialJSON == "" {
			return true
		}
		b.hasArgs = true
		return d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: b.callID, Args: delta.PartialJSON})
	default:
		// citations_delta and future delta kinds.
		return true
	}
}

// fragment emits out for a delta event (named event) carrying the text
// fragment s of block i, which must be open and of kind. An empty fragment,
// or one of a skipped block, emits nothing.
func (d *decoder) fragment(i int, kind, event, s string, out llm.Delta) bool {
	b, ok := d.open(i, kind)
	if !ok {
		return d.protocolError("%s for block %d", event, i)
	}
	return b.kind == "skip" || s == "" || d.e.Emit(out)
}

func (d *decoder) blockStop(ev *wireEvent) bool {
	i := ev.Index
	b, ok := d.open(i, "text", "thinking", "redacted_thinking", "tool_use")
	if !ok {
		return d.protocolError("content_block_stop for block %d that is not open", i)
	}
	b.closed = true
	if b.kind != "tool_use" {
		return true
	}
	if !b.hasArgs {
		// Input given whole with the block start (some compatible servers do
		// this); an empty object is what Anthropic always sends there.
		if in := bytes.TrimSpace(b.input); len(in) > 0 && !bytes.Equal(in, []byte("{}")) && !bytes.Equal(in, []byte("null")) {
			if !d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: b.callID, Args: string(in)}) {
				return false
			}
		}
	}
	return d.e.Emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: b.callID})
}

// finish handles message_stop: close what the server left open, report
// usage, and end with done.
func (d *decoder) finish() bool {
	for i := range d.blocks {
		if b := &d.blocks[i]; b.kind == "tool_use" && !b.closed {
			return d.protocolError("message_stop with tool_use block %d still open", i)
		}
	}
	if d.usage != (llm.Usage{}) && !d.e.Emit(llm.Delta{Kind: llm.DeltaUsage, Usage: d.usage}) {
		return false
	}
	d.e.Emit(llm.Delta{Kind: llm.DeltaDone, StopReason: stopReason(d.stop)})
	return false
}

// protocolError ends the stream on an event sequence Anthropic never sends.
func (d *decoder) protocolError(format string, args ...any) bool {
	d.e.Fail(&llm.APIError{
		Provider: d.p.name,
		Type:     "invalid_stream",
		Message:  "stream broke the Messages event protocol: " + fmt.Sprintf(format, args...),
	})
	return false
}

// stopReason normalises Anthropic's stop_reason
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func stopReason(r string) llm.StopReason {
	switch r {
	case "end_turn", "stop_sequence":
		return llm.StopEnd
	case "tool_use":
		return llm.StopToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopLength
	case "refusal":
		return llm.StopRefusal
	}
	return llm.StopOther // "pause_turn", or a reason added later
}
