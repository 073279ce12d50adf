package anthropicfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// defaultChunk is how many bytes of text or arguments go in one delta.
const defaultChunk = 8

// pingEvery is how many content deltas pass between two ping events.
const pingEvery = 16

// sse writes one server-sent-events response.
type sse struct {
	t   testing.TB
	ctx context.Context
	w   http.ResponseWriter
	f   http.Flusher
	// deltas counts content deltas, for pings and the Garbage fault.
	deltas     int
	reply      fakellm.Reply
	garbageOut bool
}

// event writes one event and flushes it; false when the client went away.
func (s *sse) event(name string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		s.t.Errorf("anthropicfake: marshal %s: %v", name, err)
		return false
	}
	return s.raw(name, string(data))
}

func (s *sse) raw(name, data string) bool {
	if s.ctx.Err() != nil {
		return false
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return false
	}
	s.f.Flush()
	return true
}

// delta writes one content_block_delta, then a ping or the scripted garbage
// when due, then waits ChunkDelay.
func (s *sse) delta(index int, d map[string]any) bool {
	if !s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}) {
		return false
	}
	s.deltas++
	if s.reply.Garbage && !s.garbageOut {
		s.garbageOut = true
		if !s.raw("content_block_delta", `{"type":"content_block_delta","index":`+fmt.Sprint(index)+`,"delta":{"type":"text_delta","text":`) {
			return false
		}
	}
	if s.deltas%pingEvery == 0 && !s.event("ping", map[string]string{"type": "ping"}) {
		return false
	}
	return s.reply.ChunkDelay <= 0 || sleep(s.ctx, s.reply.ChunkDelay)
}

// stream answers with the scripted reply as Anthropic's event stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *request, reply fakellm.Reply) {
	f, ok := w.(http.Flusher)
	if !ok {
		s.t.Errorf("anthropicfake: response writer cannot flush")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	out := &sse{t: s.t, ctx: r.Context(), w: w, f: f, reply: reply}

	usage := s.usage(req, reply)
	start := s.usage(req, reply)
	start["output_tokens"] = 1 // Anthropic reports the final count in message_delta
	if !out.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.nextMessageID(), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start,
	}}) {
		return
	}
	if !out.event("ping", map[string]string{"type": "ping"}) {
		return
	}
	blocks := s.blocks(reply)
	for i, b := range blocks {
		if !out.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start}) {
			return
		}
		for _, d := range b.deltas {
			if !out.delta(i, d) {
				return
			}
		}
		if reply.Truncate && i == len(blocks)-1 {
			return // a dropped connection: no block stop, no message_delta, no message_stop
		}
		if !out.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	if reply.Truncate {
		return
	}
	if reply.MidStreamError != "" {
		msg := reply.ErrorMessage
		if msg == "" {
			msg = "Overloaded"
		}
		out.event("error", errorBody(reply.MidStreamError, msg))
		return
	}
	if !out.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(reply), "stop_sequence": nil},
		"usage": usage,
	}) {
		return
	}
	out.event("message_stop", map[string]string{"type": "message_stop"})
}

// writeMessage answers a request with stream=false with one Message object.
func (s *Server) writeMessage(w http.ResponseWriter, req *request, reply fakellm.Reply) {
	var content []map[string]any
	for _, b := range s.blocks(reply) {
		c := make(map[string]any, len(b.start))
		for k, v := range b.start {
			c[k] = v
		}
		c[b.field] = b.full
		if b.start["type"] == "thinking" {
			c["signature"] = b.signature
		}
		content = append(content, c)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": s.nextMessageID(), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stopReason(reply), "stop_sequence": nil,
		"usage": s.usage(req, reply),
	})
}

// outBlock is one content block of a reply: how it starts, its deltas, and
// (for non-streamed answers) its whole value under field.
type outBlock struct {
	start     map[string]any
	deltas    []map[string]any
	field     string
	full      any
	signature string
}

func (s *Server) blocks(reply fakellm.Reply) []outBlock {
	chunk := reply.Chunk
	if chunk <= 0 {
		chunk = defaultChunk
	}
	var out []outBlock
	if reply.RedactedThinking != "" {
		out = append(out, outBlock{
			start: map[string]any{"type": "redacted_thinking", "data": reply.RedactedThinking},
			field: "data", full: reply.RedactedThinking,
		})
	}
	if reply.Thinking != "" || reply.Signature != "" {
		sig := s.sign(reply.Thinking, reply.Signature)
		b := outBlock{start: map[string]any{"type": "thinking", "thinking": "", "signature": ""},
			field: "thinking", full: reply.Thinking, signature: sig}
		for _, part := range split(reply.Thinking, chunk) {
			b.deltas = append(b.deltas, map[string]any{"type": "thinking_delta", "thinking": part})
		}
		b.deltas = append(b.deltas, map[string]any{"type": "signature_delta", "signature": sig})
		out = append(out, b)
	}
	if reply.Text != "" {
		b := outBlock{start: map[string]any{"type": "text", "text": ""}, field: "text", full: reply.Text}
		for _, part := range split(reply.Text, chunk) {
			b.deltas = append(b.deltas, map[string]any{"type": "text_delta", "text": part})
		}
		out = append(out, b)
	}
	for i, c := range reply.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_fake_%02d", i+1)
		}
		var input any = json.RawMessage(c.Args)
		if !json.Valid([]byte(c.Args)) {
			input = c.Args // non-streamed answers can only carry what parses
		}
		b := outBlock{start: map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": map[string]any{}},
			field: "input", full: input}
		// Anthropic opens every tool_use with an empty fragment.
		b.deltas = append(b.deltas, map[string]any{"type": "input_json_delta", "partial_json": ""})
		for _, part := range split(c.Args, chunk) {
			b.deltas = append(b.deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
		}
		out = append(out, b)
	}
	return out
}

// stopReason is the reply's stop reason in Anthropic's words; the API has
// no safety, recitation or malformed-call reason (a refusal stands for the
// first two, pause_turn for the others).
func stopReason(reply fakellm.Reply) string {
	switch reply.StopReason() {
	case llm.StopToolCalls:
		return "tool_use"
	case llm.StopLength:
		return "max_tokens"
	case llm.StopRefusal, llm.StopSafety, llm.StopRecitation:
		return "refusal"
	case llm.StopMalformedCall, llm.StopOther:
		return "pause_turn"
	}
	return "end_turn"
}

// usage reports scripted token counts, or ones derived from the sizes.
func (s *Server) usage(req *request, reply fakellm.Reply) map[string]any {
	in, out := reply.InputTokens, reply.OutputTokens
	if in == 0 {
		for _, m := range req.Messages {
			in += len(m.Content)/4 + 1
		}
	}
	if out == 0 {
		n := len(reply.Text) + len(reply.Thinking)
		for _, c := range reply.ToolCalls {
			n += len(c.Args) + len(c.Name)
		}
		out = n/4 + 1
	}
	return map[string]any{
		"input_tokens": in, "output_tokens": out,
		"cache_read_input_tokens": reply.CacheReadTokens, "cache_creation_input_tokens": reply.CacheWriteTokens,
	}
}

// split cuts s into pieces of at most n bytes without splitting a rune.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 {
			_, end = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
