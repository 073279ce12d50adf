package openaifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
)

// chatRequest is the part of a Chat Completions request the fake reads.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
	Tools               []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string  `json:"name,omitempty"`
		Arguments *string `json:"arguments,omitempty"`
	} `json:"function"`
}

var knownRoles = []string{"system", "developer", "user", "assistant", "tool"}

// reasoningModel mirrors OpenAI's rule: o-series and gpt-5 models reject
// max_tokens and any temperature but 1.
func reasoningModel(model string) bool {
	for _, f := range []string{"o1", "o3", "o4", "gpt-5"} {
		if rest, ok := strings.CutPrefix(model, f); ok && (rest == "" || rest[0] == '-' || rest[0] == '.') {
			return true
		}
	}
	return false
}

// wait pauses for d, returning false if the request was cancelled or the
// server is closing first.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closing:
		return false
	}
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		s.reject(w, r, raw, http.StatusBadRequest, apiError{
			Message: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)",
			Type:    "invalid_request_error",
		})
		return
	}
	if status, e, bad := validate(&req); bad {
		s.reject(w, r, raw, status, e)
		return
	}
	neutral := neutralRequest(r, raw, &req)
	reply := s.script.Next(neutral)
	if !s.wait(r, reply.Delay) {
		return
	}
	if reply.Status != 0 {
		writeError(w, reply.Status, defaultError(reply.Status, reply.ErrorType, reply.ErrorMessage), reply.RetryAfter)
		return
	}
	id := fmt.Sprintf("chatcmpl-fake%d", s.seq.Add(1))
	u := usageFor(reply, raw)
	if !req.Stream {
		s.writeJSON(w, id, req.Model, reply, u)
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.writeStream(w, r, id, req.Model, reply, includeUsage, u)
}

// validate applies OpenAI's checks that matter to an adapter.
func validate(req *chatRequest) (int, apiError, bool) {
	bad := func(msg, p, code string) (int, apiError, bool) {
		e := apiError{Message: msg, Type: "invalid_request_error"}
		if p != "" {
			e.Param = param(p)
		}
		if code != "" {
			e.Code = code
		}
		return http.StatusBadRequest, e, true
	}
	switch {
	case req.Model == "":
		return bad("you must provide a model parameter", "", "")
	case len(req.Messages) == 0:
		return bad("[] is too short - 'messages'", "messages", "")
	case reasoningModel(req.Model) && req.MaxTokens != nil:
		return bad("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
	case reasoningModel(req.Model) && req.Temperature != nil && *req.Temperature != 1:
		return bad(fmt.Sprintf("Unsupported value: 'temperature' does not support %v with this model. Only the default (1) value is supported.", *req.Temperature), "temperature", "unsupported_value")
	}
	// open holds the ids of the last assistant message's calls still waiting
	// for a tool message; inTools says we are in the run right after it.
	var open []string
	inTools := false
	caller := 0 // index of that assistant message
	unanswered := func() (int, apiError, bool) {
		return bad("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(open, ", "), fmt.Sprintf("messages.[%d].role", caller), "")
	}
	for i, m := range req.Messages {
		at := fmt.Sprintf("messages.[%d]", i)
		if !slices.Contains(knownRoles, m.Role) {
			return bad(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role), at+".role", "invalid_value")
		}
		if m.Role != "tool" && len(open) > 0 {
			return unanswered()
		}
		switch m.Role {
		case "tool":
			k := slices.Index(open, m.ToolCallID)
			if !inTools || k < 0 {
				return bad("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", at+".role", "")
			}
			open = slices.Delete(open, k, k+1)
			if isNull(m.Content) {
				return bad(fmt.Sprintf("Missing required parameter: '%s.content'.", at), at+".content", "missing_required_parameter")
			}
		case "assistant":
			if isNull(m.Content) && len(m.ToolCalls) == 0 {
				return bad("Invalid value for 'content': expected a string, got null.", at+".content", "")
			}
			open, caller = open[:0], i
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
			inTools = len(open) > 0
		default:
			inTools = false
			if isNull(m.Content) {
				return bad(fmt.Sprintf("Missing required parameter: '%s.content'.", at), at+".content", "missing_required_parameter")
			}
			if _, _, err := contentText(m.Content); err != nil {
				return bad(err.Error(), at+".content", "invalid_value")
			}
		}
	}
	if len(open) > 0 {
		return unanswered()
	}
	return 0, apiError{}, false
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// contentText reads message content: a string or an array of text and
// image_url parts. It returns the text and the number of images.
func contentText(raw json.RawMessage) (string, int, error) {
	if isNull(raw) {
		return "", 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", 0, fmt.Errorf("Invalid type for content: expected one of string or array of objects")
	}
	var texts []string
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return "", 0, fmt.Errorf("Missing required parameter: 'image_url.url'.")
			}
			images++
		default:
			return "", 0, fmt.Errorf("Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', and 'file'.", p.Type)
		}
	}
	return strings.Join(texts, "\n"), images, nil
}

// neutralRequest records what the fake understood, for test assertions.
func neutralRequest(r *http.Request, raw []byte, req *chatRequest) fakellm.Request {
	out := fakellm.Request{
		Path:   r.URL.Path,
		Header: r.Header.Clone(),
		Raw:    raw,
		Model:  req.Model,
		Stream: req.Stream,
	}
	switch {
	case req.MaxCompletionTokens != nil:
		out.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		out.MaxTokens = *req.MaxTokens
	}
	var system []string
	for _, m := range req.Messages {
		text, images, _ := contentText(m.Content)
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
			continue
		case "tool":
			out.Messages = append(out.Messages, fakellm.Message{Role: "tool", ToolResults: []fakellm.Result{{CallID: m.ToolCallID, Content: text}}})
			continue
		}
		msg := fakellm.Message{Role: m.Role, Text: text, Images: images}
		for _, c := range m.ToolCalls {
			call := fakellm.Call{ID: c.ID, Name: c.Function.Name}
			if c.Function.Arguments != nil {
				call.Args = *c.Function.Arguments
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
		out.Messages = append(out.Messages, msg)
	}
	out.System = strings.Join(system, "\n")
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, t.Function.Name)
	}
	if len(req.ToolChoice) > 0 && req.ToolChoice[0] == '{' {
		var tc struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(req.ToolChoice, &tc) == nil {
			out.ToolChoice = tc.Function.Name
		}
	}
	return out
}

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
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
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

func finishReason(reply fakellm.Reply) string {
	if len(reply.ToolCalls) > 0 {
		return "tool_calls"
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
	send := func(data []byte) bool {
		if contentSent > 1 && !s.wait(r, reply.ChunkDelay) {
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
	for _, t := range splitText(reply.Text, reply.Chunk) {
		if !content(map[string]any{"content": t}) {
			return
		}
	}
	for _, frag := range interleave(reply.ToolCalls, reply.Chunk) {
		if !content(map[string]any{"tool_calls": []wireToolCall{frag}}) {
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
