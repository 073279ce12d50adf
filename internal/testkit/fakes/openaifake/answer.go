package openaifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// wireUsage is OpenAI's usage object.
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
		AudioTokens     int `json:"audio_tokens"`
	} `json:"completion_tokens_details"`
}

// usageFor reports the scripted token counts, or ones derived from sizes
// (about four bytes a token) when the script left them zero.
func usageFor(reply fakellm.Reply, raw []byte) wireUsage {
	in := reply.InputTokens
	if in == 0 {
		in = max(len(raw)/4, 1)
	}
	outBytes := len(reply.Text) + len(reply.Thinking)
	for _, c := range reply.ToolCalls {
		outBytes += len(c.Name) + len(c.Args)
	}
	out := reply.OutputTokens
	if out == 0 {
		out = max(outBytes/4, 1)
	}
	var u wireUsage
	u.PromptTokens = in
	u.CompletionTokens = out
	u.TotalTokens = in + out
	u.PromptTokensDetails.CachedTokens = min(reply.CachedTokens, in)
	if reply.Thinking != "" {
		u.CompletionTokensDetails.ReasoningTokens = min(max(len(reply.Thinking)/4, 1), out)
	}
	return u
}

// writeJSON answers a non-streaming request. Faults map to their nearest
// non-streaming form: Truncate cuts the body, Garbage sends invalid JSON,
// MidStreamError becomes a 500.
func (s *Server) writeJSON(w http.ResponseWriter, id, model string, reply fakellm.Reply, u wireUsage) {
	if reply.MidStreamError != "" {
		writeError(w, http.StatusInternalServerError, apiError{Message: reply.MidStreamError, Type: "server_error"}, "")
		return
	}
	type message struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
		Refusal          *string        `json:"refusal"`
	}
	msg := message{Role: "assistant", ReasoningContent: reply.Thinking}
	switch {
	case reply.Stop == llm.StopRefusal:
		msg.Refusal = &reply.Text
	case reply.Text != "" || len(reply.ToolCalls) == 0:
		msg.Content = &reply.Text
	}
	for _, c := range reply.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, callHeader(-1, c, c.Args))
	}
	body, _ := json.Marshal(map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(reply)}},
		"usage":   u,
	})
	w.Header().Set("Content-Type", "application/json")
	switch {
	case reply.Garbage:
		body = []byte(`{"id": "chatcmpl-garbage", "choices": [ this is not json`)
	case reply.Truncate:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
	_, _ = w.Write(body)
}

// created is the fixed timestamp of every answer, so output is reproducible.
const created = 1700000000

// finishReason is the reply's stop reason as Chat Completions names it: a
// refusal ends with "stop" (its words come as the refusal), a filter with
// content_filter; the API has no malformed-call reason, so that and other
// reasons are sent as an unknown value, as some compatible servers do.
func finishReason(reply fakellm.Reply) string {
	switch reply.StopReason() {
	case llm.StopToolCalls:
		return "tool_calls"
	case llm.StopLength:
		return "length"
	case llm.StopSafety, llm.StopRecitation:
		return "content_filter"
	case llm.StopMalformedCall, llm.StopOther:
		return "other"
	}
	return "stop"
}

// callHeader is a tool call's first fragment (index >= 0) or a whole call.
func callHeader(index int, c fakellm.Call, args string) wireToolCall {
	var tc wireToolCall
	if index >= 0 {
		tc.Index = &index
	}
	tc.ID = c.ID // empty stays absent, as some compatible servers send it
	tc.Type = "function"
	tc.Function.Name = c.Name
	tc.Function.Arguments = &args
	return tc
}

// splitText cuts s into pieces of about n bytes without splitting a rune.
func splitText(s string, n int) []string {
	if n <= 0 {
		n = 8
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !utf8RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// argPieces splits tool arguments into at least two fragments when they are
// long enough, so clients must join them.
func argPieces(args string, chunk int) []string {
	if chunk <= 0 {
		chunk = 8
	}
	if len(args) >= 2 {
		chunk = min(chunk, (len(args)+1)/2)
	}
	return splitText(args, chunk)
}

var sseDone = []byte("data: [DONE]\n\n")

// writeStream answers with server-sent events the way OpenAI streams:
// a role chunk, reasoning_content, content, tool-call fragments (interleaved
// across calls), a finish chunk, a usage chunk when asked, then [DONE].
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, id, model string, reply fakellm.Reply, includeUsage bool, u wireUsage) {
	flusher := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	// ChunkDelay separates content chunks; the role chunk and the first
	// content chunk go out together, so a test can act on the first delta
	// while the rest of the stream is still pending.
	contentSent := 0
	held := false
	send := func(data []byte) bool {
		if contentSent > 1 && !held && reply.HoldAfterFirst != nil {
			held = true
			select {
			case <-reply.HoldAfterFirst:
			case <-r.Context().Done():
				s.abandon()
				return false
			case <-s.closing:
				s.abandon()
				return false
			}
		}
		if contentSent > 1 && !s.wait(r, reply.ChunkDelay) {
			s.abandon()
			return false
		}
		var buf bytes.Buffer
		buf.Grow(len(data) + 8)
		buf.WriteString("data: ")
		buf.Write(data)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	usageField := json.RawMessage(nil)
	if includeUsage {
		usageField = json.RawMessage("null") // OpenAI sends usage:null until the last chunk
	}
	chunk := func(d map[string]any, finish *string) []byte {
		b, _ := json.Marshal(streamChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			SystemFingerprint: "fp_openaifake",
			Choices:           []streamChoice{{Index: 0, Delta: d, FinishReason: finish}},
			Usage:             usageField,
		})
		return b
	}
	garbageDue := reply.Garbage
	content := func(d map[string]any) bool {
		contentSent++
		if !send(chunk(d, nil)) {
			return false
		}
		if garbageDue {
			garbageDue = false
			return send([]byte(`{"id": "` + id + `", "choices": [{"delta": {"content": "oops"`))
		}
		return true
	}

	if !send(chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)) {
		return
	}
	for _, t := range splitText(reply.Thinking, reply.Chunk) {
		if !content(map[string]any{"reasoning_content": t}) {
			return
		}
	}
	field := "content"
	if reply.Stop == llm.StopRefusal {
		field = "refusal"
	}
	for _, t := range splitText(reply.Text, reply.Chunk) {
		if !content(map[string]any{field: t}) {
			return
		}
	}
	for _, frag := range interleave(reply.ToolCalls, reply.Chunk) {
		if !content(map[string]any{"tool_calls": []wireToolCall{frag}}) {
			return
		}
	}
	if garbageDue { // nothing was streamed, but the garbage chunk was asked for
		garbageDue = false
		if !send([]byte(`{"id": "` + id + `", "choices": [`)) {
			return
		}
	}
	switch {
	case reply.MidStreamError != "":
		send(mustJSON(map[string]any{"error": apiError{Message: reply.MidStreamError, Type: "server_error"}}))
		return
	case reply.Truncate:
		panic(http.ErrAbortHandler) // close the connection: no finish_reason, no [DONE]
	}
	finish := finishReason(reply)
	if !send(chunk(map[string]any{}, &finish)) {
		return
	}
	if includeUsage {
		b, _ := json.Marshal(streamChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			SystemFingerprint: "fp_openaifake", Choices: []streamChoice{}, Usage: mustJSON(u),
		})
		if !send(b) {
			return
		}
	}
	_, _ = w.Write(sseDone)
	flusher.Flush()
	if reply.HoldEnd != nil {
		select {
		case <-reply.HoldEnd:
		case <-r.Context().Done():
		case <-s.closing:
		}
	}
}

type streamChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []streamChoice  `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type streamChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("openaifake: marshal %T: %v", v, err)) // only fixed types are marshalled
	}
	return b
}

// interleave lays out the fragments of all calls round-robin: every call's
// header, then every call's first argument piece, and so on, so a client has
// to join fragments by index, not by arrival order.
func interleave(calls []fakellm.Call, chunk int) []wireToolCall {
	per := make([][]wireToolCall, len(calls))
	longest := 0
	for i, c := range calls {
		per[i] = append(per[i], callHeader(i, c, ""))
		for _, a := range argPieces(c.Args, chunk) {
			idx := i
			var f wireToolCall
			f.Index = &idx
			f.Function.Arguments = &a
			per[i] = append(per[i], f)
		}
		longest = max(longest, len(per[i]))
	}
	var out []wireToolCall
	for k := range longest {
		for i := range per {
			if k < len(per[i]) {
				out = append(out, per[i][k])
			}
		}
	}
	return out
}
