package openai

import (
	"strings"

	goopenai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// responsesRequest translates the neutral request into /responses. The
// history is first rendered as Chat Completions messages (which pairs every
// call with its result and drops orphans) and then turned into input items,
// with this API's own reasoning items put back before the output they led to.
func (r *Responses) responsesRequest(req llm.Request) goopenai.CreateResponseRequest {
	store := r.cfg.Store
	out := goopenai.CreateResponseRequest{
		Model:           req.Model,
		Instructions:    req.System,
		MaxOutputTokens: req.MaxTokens,
		Store:           &store,
		// Without the encrypted reasoning, a store: false conversation loses
		// the model's reasoning between calls.
		Include: []goopenai.ResponseInclude{goopenai.ResponseIncludeReasoningEncryptedContent},
	}
	if req.ReasoningEffort != "" {
		out.Reasoning = &goopenai.ResponseReasoning{Effort: req.ReasoningEffort}
	}
	if t := req.Temperature; t != nil && !isReasoningModel(req.Model) {
		f := float32(*t)
		out.Temperature = &f
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = emptyParameters
		}
		out.Tools = append(out.Tools, goopenai.NewResponseFunctionTool(goopenai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}))
	}
	if req.ForceTool != "" {
		out.ToolChoice = map[string]string{"type": "function", "name": req.ForceTool}
	}
	var items []any
	for i, step := range steps(req.Messages) {
		m := step[0]
		switch m.Role {
		case llm.RoleSystem:
			if t := joinText(m.Parts); t != "" {
				items = append(items, goopenai.ResponseInputMessage{Type: "message", Role: "developer", Content: t})
			}
		case llm.RoleUser:
			if u, ok := userMessage(m.Parts); ok {
				items = append(items, inputItems(u)...)
			}
		case llm.RoleAssistant:
			rendered := r.assistant(nil, m, step[1:])
			if len(rendered) > 0 && m.Meta != nil && m.Meta.API == ResponsesAPI {
				items = append(items, reasoningItems(m)...)
			}
			for _, c := range rendered {
				items = append(items, inputItems(c)...)
			}
		case llm.RoleTool:
			r.log.Warn("dropping tool results without a preceding tool call", zap.String("provider", r.name), zap.Int("index", i))
		}
	}
	out.Input = items
	return out
}

// reasoningItem is a reasoning input item; go-openai has no type for it.
type reasoningItem struct {
	Type             string                         `json:"type"`
	ID               string                         `json:"id"`
	Summary          []goopenai.ResponseSummaryPart `json:"summary"`
	EncryptedContent string                         `json:"encrypted_content"`
}

// functionCallItem is a function_call input item.
type functionCallItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// reasoningItems replays m's thinking parts that carry this API's encrypted
// reasoning; other thinking (another vendor's) is not sent.
func reasoningItems(m llm.Message) []any {
	var out []any
	for _, pt := range m.Parts {
		if pt.Kind != llm.PartThinking {
			continue
		}
		id, enc, ok := strings.Cut(pt.Signature, reasoningSep)
		if !ok || id == "" || enc == "" {
			continue
		}
		it := reasoningItem{Type: "reasoning", ID: id, Summary: []goopenai.ResponseSummaryPart{}, EncryptedContent: enc}
		if pt.Text != "" {
			it.Summary = append(it.Summary, goopenai.ResponseSummaryPart{Type: "summary_text", Text: pt.Text})
		}
		out = append(out, it)
	}
	return out
}

// inputItems converts one rendered chat message into input items.
func inputItems(c goopenai.ChatCompletionMessage) []any {
	switch c.Role {
	case goopenai.ChatMessageRoleTool:
		return []any{goopenai.ResponseFunctionCallOutput{Type: "function_call_output", CallID: c.ToolCallID, Output: c.Content}}
	case goopenai.ChatMessageRoleAssistant:
		var out []any
		if c.Content != "" {
			out = append(out, goopenai.ResponseInputMessage{Type: "message", Role: "assistant", Content: c.Content})
		}
		for _, tc := range c.ToolCalls {
			out = append(out, functionCallItem{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		return out
	}
	if len(c.MultiContent) == 0 {
		return []any{goopenai.ResponseInputMessage{Type: "message", Role: c.Role, Content: c.Content}}
	}
	var parts []any
	for _, p := range c.MultiContent {
		switch {
		case p.Type == goopenai.ChatMessagePartTypeImageURL && p.ImageURL != nil:
			parts = append(parts, goopenai.ResponseInputImage{Type: "input_image", ImageURL: p.ImageURL.URL, Detail: "auto"})
		default:
			parts = append(parts, goopenai.ResponseInputText{Type: "input_text", Text: p.Text})
		}
	}
	return []any{goopenai.ResponseInputMessage{Type: "message", Role: c.Role, Content: parts}}
}
