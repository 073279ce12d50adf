package geminifake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// defaultChunk is how many bytes of text go in one chunk.
const defaultChunk = 8

// sse writes one server-sent-events response.
type sse struct {
	s     *Server
	ctx   context.Context
	w     http.ResponseWriter
	f     http.Flusher
	reply fakellm.Reply
	model string
	usage map[string]int
	// chunks counts content chunks, for the Garbage fault.
	chunks int
}

// chunk writes one GenerateContentResponse with parts and flushes it;
// false when the client went away.
func (o *sse) chunk(parts []map[string]any, finish string) bool {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if len(parts) == 0 {
		cand["content"] = map[string]any{"role": "model"}
	}
	if finish != "" {
		cand["finishReason"] = finish
	}
	if !o.data(map[string]any{"candidates": []any{cand}, "usageMetadata": o.usage, "modelVersion": o.model, "responseId": "fake-response"}) {
		return false
	}
	if finish != "" {
		return true
	}
	o.chunks++
	if o.reply.Garbage && o.chunks == 1 {
		if !o.raw(`{"candidates": [{"content": {"role": "model", "parts": [{"text": "`) {
			return false
		}
	}
	return o.reply.ChunkDelay <= 0 || sleep(o.ctx, o.reply.ChunkDelay)
}

func (o *sse) data(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		o.s.t.Errorf("geminifake: marshal chunk: %v", err)
		return false
	}
	return o.raw(string(b))
}

func (o *sse) raw(data string) bool {
	if o.ctx.Err() != nil {
		return false
	}
	if _, err := fmt.Fprintf(o.w, "data: %s\r\n\r\n", data); err != nil {
		return false
	}
	o.f.Flush()
	return true
}

// stream answers with the scripted reply as Gemini's event stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *request, reply fakellm.Reply) {
	f, ok := w.(http.Flusher)
	if !ok {
		s.t.Errorf("geminifake: response writer cannot flush")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	out := &sse{s: s, ctx: r.Context(), w: w, f: f, reply: reply, model: req.model, usage: usage(req, reply)}
	chunk := reply.Chunk
	if chunk <= 0 {
		chunk = defaultChunk
	}
	for _, t := range split(reply.Thinking, chunk) {
		if !out.chunk([]map[string]any{{"text": t, "thought": true}}, "") {
			return
		}
	}
	for _, t := range split(reply.Text, chunk) {
		if !out.chunk([]map[string]any{{"text": t}}, "") {
			return
		}
	}
	finish := finishReason(reply)
	signed := false
	for _, c := range reply.ToolCalls {
		var args map[string]any
		if json.Unmarshal([]byte(c.Args), &args) != nil {
			// Gemini's arguments are a Struct: a call it cannot express
			// ends the answer with this reason instead.
			finish = "MALFORMED_FUNCTION_CALL"
			break
		}
		fc := map[string]any{"name": c.Name, "args": args}
		if c.ID != "" {
			fc["id"] = c.ID
		}
		p := map[string]any{"functionCall": fc}
		if !signed {
			// Like Gemini, only the first of parallel calls is signed.
			p["thoughtSignature"] = s.sign(reply.Signature)
			signed = true
		}
		if !out.chunk([]map[string]any{p}, "") {
			return
		}
	}
	if !signed && (reply.Thinking != "" || reply.Signature != "") {
		if !out.chunk([]map[string]any{{"text": "", "thoughtSignature": s.sign(reply.Signature)}}, "") {
			return
		}
	}
	switch {
	case reply.Truncate:
		return // a dropped connection: no finish reason
	case reply.MidStreamError != "":
		msg := reply.ErrorMessage
		if msg == "" {
			msg = "The model is overloaded. Please try again later."
		}
		out.data(errorBody(httpStatus(reply.MidStreamError), reply.MidStreamError, "", msg, nil))
		return
	}
	out.chunk(nil, finish)
}

// usage reports scripted token counts, or ones derived from the sizes.
func usage(req *request, reply fakellm.Reply) map[string]int {
	in, out := reply.InputTokens, reply.OutputTokens
	if in == 0 {
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				if p.Text != nil {
					in += len(*p.Text)/4 + 1
				}
			}
		}
	}
	if out == 0 {
		n := len(reply.Text)
		for _, c := range reply.ToolCalls {
			n += len(c.Args) + len(c.Name)
		}
		out = n/4 + 1
	}
	u := map[string]int{"promptTokenCount": in, "candidatesTokenCount": out}
	thoughts := 0
	if reply.Thinking != "" {
		thoughts = len(reply.Thinking)/4 + 1
		u["thoughtsTokenCount"] = thoughts
	}
	if reply.CachedTokens > 0 {
		u["cachedContentTokenCount"] = reply.CachedTokens
	}
	u["totalTokenCount"] = in + out + thoughts
	return u
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

// finishReason is the reply's stop reason in Gemini's words; Gemini has no
// refusal (SAFETY stands for it) and ends calls with STOP.
func finishReason(reply fakellm.Reply) string {
	switch reply.StopReason() {
	case llm.StopLength:
		return "MAX_TOKENS"
	case llm.StopRefusal, llm.StopSafety:
		return "SAFETY"
	case llm.StopRecitation:
		return "RECITATION"
	case llm.StopMalformedCall:
		return "MALFORMED_FUNCTION_CALL"
	case llm.StopOther:
		return "OTHER"
	}
	return "STOP"
}
