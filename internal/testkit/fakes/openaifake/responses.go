package openaifake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// responsesRequest is the part of a POST /v1/responses body the fake checks.
type responsesRequest struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Input        json.RawMessage   `json:"input"`
	Stream       bool              `json:"stream"`
	Store        *bool             `json:"store"`
	Include      []string          `json:"include"`
	MaxOutput    int               `json:"max_output_tokens"`
	Tools        []json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
}

// responsesItem is one input item, of any type.
type responsesItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        *string         `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
	Summary          []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// responses serves POST /v1/responses: streaming only (the adapter never asks
// otherwise), with the Responses API's checks on input item order.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		s.reject(w, r, raw, http.StatusBadRequest, apiError{Message: "We could not parse the JSON body of your request.", Type: "invalid_request_error"})
		return
	}
	neutral, e, bad := s.checkResponses(&req)
	if bad {
		s.reject(w, r, raw, http.StatusBadRequest, e)
		return
	}
	neutral.Path, neutral.Header, neutral.Raw, neutral.Received = r.URL.Path, r.Header.Clone(), raw, received
	reply := s.script.Next(neutral)
	if !s.wait(r, reply.Delay) {
		s.abandon()
		return
	}
	if reply.Status != 0 {
		if reply.RetryAfterMS != "" {
			w.Header().Set("retry-after-ms", reply.RetryAfterMS)
		}
		writeError(w, reply.Status, defaultError(reply.Status, reply.ErrorType, reply.ErrorMessage), reply.RetryAfter)
		return
	}
	s.writeResponsesStream(w, r, req.Model, reply, usageFor(reply, raw), req.Store == nil || *req.Store)
}

func invalid(p, format string, args ...any) apiError {
	return apiError{Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: param(p)}
}

// checkResponses applies the API's checks that matter to an adapter and
// returns what the fake understood.
func (s *Server) checkResponses(req *responsesRequest) (fakellm.Request, apiError, bool) {
	out := fakellm.Request{Model: req.Model, System: req.Instructions, Stream: req.Stream, MaxTokens: req.MaxOutput}
	if req.Model == "" {
		return out, invalid("model", "Missing required parameter: 'model'."), true
	}
	if !req.Stream {
		return out, invalid("stream", "openaifake serves /v1/responses streaming only"), true
	}
	for i, raw := range req.Tools {
		var t struct {
			Type     string          `json:"type"`
			Name     string          `json:"name"`
			Function json.RawMessage `json:"function"`
		}
		_ = json.Unmarshal(raw, &t)
		if t.Type == "function" && t.Name == "" {
			return out, invalid(fmt.Sprintf("tools[%d].name", i), "Missing required parameter: 'tools[%d].name'.", i), true
		}
		out.Tools = append(out.Tools, t.Name)
	}
	var items []responsesItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return out, invalid("input", "Invalid type for 'input': expected an array of input items."), true
	}
	store := req.Store == nil || *req.Store
	called := map[string]bool{}   // call ids seen in function_call items
	answered := map[string]bool{} // call ids with a function_call_output
	for i, it := range items {
		switch it.Type {
		case "message", "":
			text, images, err := responsesContent(it.Content)
			if err != nil {
				return out, invalid(fmt.Sprintf("input[%d].content", i), "%s", err), true
			}
			switch it.Role {
			case "user", "assistant":
				out.Messages = append(out.Messages, fakellm.Message{Role: it.Role, Text: text, Images: images})
			case "system", "developer":
				out.System = strings.TrimPrefix(out.System+"\n"+text, "\n")
			default:
				return out, invalid(fmt.Sprintf("input[%d].role", i), "Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", it.Role), true
			}
		case "reasoning":
			switch {
			case it.ID == "":
				return out, invalid(fmt.Sprintf("input[%d].id", i), "Missing required parameter: 'input[%d].id'.", i), true
			case !store && (it.EncryptedContent == nil || *it.EncryptedContent == ""):
				return out, invalid("input", "Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID), true
			case it.EncryptedContent != nil && *it.EncryptedContent != encrypt(it.ID):
				return out, invalid("input", "The encrypted content for item %s could not be verified.", it.ID), true
			case i+1 == len(items) || items[i+1].Type == "function_call_output":
				return out, invalid("input", "Item '%s' of type 'reasoning' was provided without its required following item.", it.ID), true
			}
			out.Messages = append(out.Messages, fakellm.Message{Role: "assistant", Thinking: summaryText(it)})
		case "function_call":
			if it.CallID == "" || it.Name == "" || it.Arguments == nil {
				return out, invalid(fmt.Sprintf("input[%d]", i), "Missing required parameter: 'input[%d].call_id', 'name' or 'arguments'.", i), true
			}
			if s.strictArgs && !argumentsObject(it.Arguments) {
				return out, invalid(fmt.Sprintf("input[%d].arguments", i), "input[%d].arguments is not a valid JSON object", i), true
			}
			called[it.CallID] = true
			out.Messages = append(out.Messages, fakellm.Message{Role: "assistant", ToolCalls: []fakellm.Call{{ID: it.CallID, Name: it.Name, Args: *it.Arguments}}})
		case "function_call_output":
			if !called[it.CallID] {
				return out, invalid("input", "No tool call found for function call output with call_id %s.", it.CallID), true
			}
			var content string
			if json.Unmarshal(it.Output, &content) != nil {
				return out, invalid(fmt.Sprintf("input[%d].output", i), "Invalid type for 'input[%d].output': expected a string.", i), true
			}
			answered[it.CallID] = true
			out.Messages = append(out.Messages, fakellm.Message{Role: "tool", ToolResults: []fakellm.Result{{CallID: it.CallID, Content: content}}})
		default:
			return out, invalid(fmt.Sprintf("input[%d].type", i), "Invalid value: '%s'.", it.Type), true
		}
	}
	for id := range called {
		if !answered[id] {
			return out, invalid("input", "No tool output found for function call %s.", id), true
		}
	}
	return out, apiError{}, false
}

func summaryText(it responsesItem) string {
	var parts []string
	for _, p := range it.Summary {
		parts = append(parts, p.Text)
	}
	return strings.Join(parts, "\n")
}

// responsesContent reads a message's content: a string or an array of
// input_text/output_text/input_image parts (Chat Completions' "text" and
// "image_url" parts are refused, as the real API does).
func responsesContent(raw json.RawMessage) (string, int, error) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str, 0, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", 0, fmt.Errorf("Invalid type for 'content': expected a string or an array of content parts.")
	}
	var texts []string
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			texts = append(texts, p.Text)
		case "input_image":
			if p.ImageURL == "" {
				return "", 0, fmt.Errorf("Missing required parameter: 'image_url'.")
			}
			images++
		default:
			return "", 0, fmt.Errorf("Invalid value: '%s'. Supported values are: 'input_text', 'input_image', 'output_text', 'refusal', 'input_file'.", p.Type)
		}
	}
	return strings.Join(texts, "\n"), images, nil
}

// encrypt is the fake's "encrypted" reasoning for item id: checked on replay,
// so an adapter must send back exactly what it was given.
func encrypt(id string) string {
	return base64.StdEncoding.EncodeToString([]byte("openaifake reasoning " + id))
}

// writeResponsesStream sends reply as Responses API events.
func (s *Server) writeResponsesStream(w http.ResponseWriter, r *http.Request, model string, reply fakellm.Reply, u wireUsage, store bool) {
	flusher := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	n := s.seq.Add(1)
	respID := fmt.Sprintf("resp_fake%d", n)
	seq := 0
	sent := 0
	garbageDue := reply.Garbage
	var send func(ev map[string]any) bool
	send = func(ev map[string]any) bool {
		if sent > 1 && !s.wait(r, reply.ChunkDelay) {
			s.abandon()
			return false
		}
		sent++
		seq++
		ev["sequence_number"] = seq
		b, _ := json.Marshal(ev)
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", ev["type"], b)
		if garbageDue && ev["type"] == "response.output_text.delta" {
			// One event that is not valid JSON after the first text.
			garbageDue = false
			buf.WriteString("event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\": \"oops\"\n\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	response := func(status string) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": created, "status": status, "model": model, "store": store}
	}
	if !send(map[string]any{"type": "response.created", "response": response("in_progress")}) {
		return
	}
	idx := 0
	item := func(it map[string]any, between func() bool) bool {
		i := idx
		idx++
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		if !send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added}) {
			return false
		}
		if between != nil && !between() {
			return false
		}
		it["status"] = "completed"
		return send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	if reply.Thinking != "" {
		id := fmt.Sprintf("rs_fake%d", n)
		it := map[string]any{"type": "reasoning", "id": id, "summary": []map[string]string{{"type": "summary_text", "text": reply.Thinking}}, "encrypted_content": encrypt(id)}
		if !item(it, nil) {
			return
		}
	}
	if reply.Text != "" {
		id := fmt.Sprintf("msg_fake%d", n)
		part, event := map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}, "response.output_text.delta"
		if reply.Stop == llm.StopRefusal {
			part, event = map[string]any{"type": "refusal", "refusal": reply.Text}, "response.refusal.delta"
		}
		it := map[string]any{"type": "message", "id": id, "role": "assistant", "content": []map[string]any{part}}
		ok := item(it, func() bool {
			for _, t := range splitText(reply.Text, reply.Chunk) {
				if !send(map[string]any{"type": event, "item_id": id, "output_index": idx - 1, "content_index": 0, "delta": t}) {
					return false
				}
			}
			return true
		})
		if !ok {
			return
		}
	}
	for k, c := range reply.ToolCalls {
		id := fmt.Sprintf("fc_fake%d_%d", n, k)
		it := map[string]any{"type": "function_call", "id": id, "call_id": c.ID, "name": c.Name, "arguments": ""}
		ok := item(it, func() bool {
			for _, a := range argPieces(c.Args, reply.Chunk) {
				if !send(map[string]any{"type": "response.function_call_arguments.delta", "item_id": id, "output_index": idx - 1, "delta": a}) {
					return false
				}
			}
			it["arguments"] = c.Args
			return true
		})
		if !ok {
			return
		}
	}
	switch {
	case reply.MidStreamError != "":
		fail := response("failed")
		fail["error"] = map[string]string{"code": "server_error", "message": reply.MidStreamError}
		send(map[string]any{"type": "response.failed", "response": fail})
		return
	case reply.Truncate:
		panic(http.ErrAbortHandler) // close the connection before response.completed
	}
	status, reason := "completed", incompleteReason(reply)
	if reason != "" {
		status = "incomplete"
	}
	done := response(status)
	if reason != "" {
		done["incomplete_details"] = map[string]string{"reason": reason}
	}
	if !reply.NoUsage {
		done["usage"] = map[string]any{
			"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
			"input_tokens_details":  map[string]int{"cached_tokens": u.PromptTokensDetails.CachedTokens},
			"output_tokens_details": map[string]int{"reasoning_tokens": u.CompletionTokensDetails.ReasoningTokens},
		}
	}
	send(map[string]any{"type": "response." + status, "response": done})
}

// incompleteReason is why a reply ends with response.incomplete, or "" for
// response.completed. The API names two reasons; the fake sends "other"
// for the stop reasons it lacks.
func incompleteReason(reply fakellm.Reply) string {
	switch reply.StopReason() {
	case llm.StopLength:
		return "max_output_tokens"
	case llm.StopSafety, llm.StopRecitation:
		return "content_filter"
	case llm.StopMalformedCall, llm.StopOther:
		return "other"
	}
	return ""
}
