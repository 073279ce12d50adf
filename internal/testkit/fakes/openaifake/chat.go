package openaifake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
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

// abandon drops the connection when the fake is closing, so a client whose
// answer was still pending sees a failure rather than an empty 200 or a
// cleanly ended stream.
func (s *Server) abandon() {
	select {
	case <-s.closing:
		panic(http.ErrAbortHandler)
	default:
	}
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
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
	if status, e, bad := validate(&req, s.strictArgs); bad {
		s.reject(w, r, raw, status, e)
		return
	}
	neutral := neutralRequest(r, raw, &req)
	neutral.Received = received
	reply := s.script.Next(neutral)
	if !s.wait(r, reply.Delay) {
		s.abandon()
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
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !reply.NoUsage
	s.writeStream(w, r, id, req.Model, reply, includeUsage, u)
}

// validate applies OpenAI's checks that matter to an adapter; strictArgs
// adds the argument parsing of servers like vLLM.
func validate(req *chatRequest, strictArgs bool) (int, apiError, bool) {
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
			for j, c := range m.ToolCalls {
				open = append(open, c.ID)
				if strictArgs && !argumentsObject(c.Function.Arguments) {
					return bad(fmt.Sprintf("%s.tool_calls.[%d].function.arguments is not a valid JSON object", at, j), fmt.Sprintf("%s.tool_calls.[%d].function.arguments", at, j), "")
				}
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

// argumentsObject reports whether a call's arguments parse as a JSON
// object, the way a server that parses them (vLLM) needs them to.
func argumentsObject(args *string) bool {
	if args == nil {
		return false
	}
	var obj map[string]any
	return json.Unmarshal([]byte(*args), &obj) == nil && obj != nil
}
