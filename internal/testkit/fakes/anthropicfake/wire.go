package anthropicfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// The request types are written from Anthropic's API reference, not taken
// from the SDK, so the fake checks the adapter against the wire format rather
// than against the SDK's own idea of it. Unknown fields are refused, as the
// real API refuses "extra inputs".

type request struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []message       `json:"messages"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	Thinking      *thinking       `json:"thinking"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Metadata      json.RawMessage `json:"metadata"`
	Stream        bool            `json:"stream"`

	// system is the decoded System.
	system []block
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`

	// blocks is the decoded Content (a string becomes one text block).
	blocks []block
}

type block struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	CacheControl *cacheControl   `json:"cache_control"`
	Citations    json.RawMessage `json:"citations"`
	// thinking
	Thinking  *string `json:"thinking"`
	Signature *string `json:"signature"`
	// redacted_thinking
	Data *string `json:"data"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
	// image
	Source *imageSource `json:"source"`

	// content is the decoded Content of a tool_result.
	content []block
}

type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// strict decodes JSON refusing unknown fields and trailing data.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

// parseRequest decodes the body and the string-or-blocks fields.
func parseRequest(raw []byte) (*request, error) {
	var req request
	if err := strict(raw, &req); err != nil {
		return nil, fmt.Errorf("invalid request body: %v", err)
	}
	var err error
	if req.system, err = decodeContent(req.System, "system"); err != nil {
		return nil, err
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		path := fmt.Sprintf("messages.%d.content", i)
		if len(m.Content) == 0 || string(m.Content) == "null" {
			return nil, fmt.Errorf("%s: Field required", path)
		}
		if m.blocks, err = decodeContent(m.Content, path); err != nil {
			return nil, err
		}
		for j := range m.blocks {
			b := &m.blocks[j]
			if b.Type != "tool_result" {
				continue
			}
			if b.content, err = decodeContent(b.Content, fmt.Sprintf("%s.%d.content", path, j)); err != nil {
				return nil, err
			}
		}
	}
	return &req, nil
}

// decodeContent accepts a string (one text block), an array of blocks, or
// nothing.
func decodeContent(raw json.RawMessage, path string) ([]block, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	if trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		return []block{{Type: "text", Text: &s}}, nil
	}
	var blocks []block
	if err := strict(trimmed, &blocks); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return blocks, nil
}

func (b block) text() string {
	if b.Text == nil {
		return ""
	}
	return *b.Text
}

// neutral is what the fake model understood of the request.
func (r *request) neutral() fakellm.Request {
	out := fakellm.Request{Model: r.Model, Stream: r.Stream}
	if r.MaxTokens != nil {
		out.MaxTokens = *r.MaxTokens
	}
	if r.Thinking != nil && r.Thinking.Type == "enabled" {
		out.ThinkingBudget = r.Thinking.BudgetTokens
	}
	var sys []string
	for _, b := range r.system {
		sys = append(sys, b.text())
	}
	out.System = strings.Join(sys, "\n")
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, t.Name)
	}
	if r.ToolChoice != nil && r.ToolChoice.Type == "tool" {
		out.ToolChoice = r.ToolChoice.Name
	}
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, neutralMessage(m))
	}
	return out
}

func neutralMessage(m message) fakellm.Message {
	nm := fakellm.Message{Role: m.Role}
	var texts []string
	for _, b := range m.blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.text())
		case "image":
			nm.Images++
		case "thinking":
			if b.Thinking != nil {
				nm.Thinking += *b.Thinking
			}
		case "redacted_thinking":
			nm.RedactedThinking++
		case "tool_use":
			nm.ToolCalls = append(nm.ToolCalls, fakellm.Call{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		case "tool_result":
			var parts []string
			for _, c := range b.content {
				switch c.Type {
				case "text":
					parts = append(parts, c.text())
				case "image":
					nm.Images++
				}
			}
			nm.ToolResults = append(nm.ToolResults, fakellm.Result{CallID: b.ToolUseID, Content: strings.Join(parts, "\n"), IsError: b.IsError})
		}
	}
	nm.Text = strings.Join(texts, "\n")
	return nm
}
