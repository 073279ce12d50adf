package anthropicfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The rules below are the ones Anthropic's Messages API enforces and that a
// provider-neutral history most easily breaks. Messages follow the API's own
// "path: reason" style so a failing test points at the offending block.

var (
	toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	toolIDRE   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}
)

// maxCacheBreakpoints is how many cache_control marks one request may carry.
const maxCacheBreakpoints = 4

// minThinkingBudget is the smallest budget_tokens Anthropic accepts.
const minThinkingBudget = 1024

func (s *Server) validate(r *request) error {
	checks := []func(*request) error{
		validateTop, validateTools, validateThinking, validateCacheControl,
		validateRoles, validateBlocks, validateToolPairing, validateThinkingWithTools,
		s.validateSignatures,
	}
	for _, check := range checks {
		if err := check(r); err != nil {
			return err
		}
	}
	return nil
}

func validateTop(r *request) error {
	switch {
	case r.Model == "":
		return fmt.Errorf("model: Field required")
	case r.MaxTokens == nil:
		return fmt.Errorf("max_tokens: Field required")
	case *r.MaxTokens < 1:
		return fmt.Errorf("max_tokens: Input should be greater than or equal to 1")
	case len(r.Messages) == 0:
		return fmt.Errorf("messages: at least one message is required")
	case r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1):
		return fmt.Errorf("temperature: Input should be less than or equal to 1")
	}
	for i, b := range r.system {
		if b.Type != "text" {
			return fmt.Errorf("system.%d.type: Input should be 'text'", i)
		}
		if strings.TrimSpace(b.text()) == "" {
			return fmt.Errorf("system.%d.text: text content blocks must contain non-whitespace text", i)
		}
	}
	return nil
}

func validateTools(r *request) error {
	names := make(map[string]bool, len(r.Tools))
	for i, t := range r.Tools {
		if !toolNameRE.MatchString(t.Name) {
			return fmt.Errorf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		}
		if names[t.Name] {
			return fmt.Errorf("tools: Tool names must be unique.")
		}
		names[t.Name] = true
		var schema struct {
			Type string `json:"type"`
		}
		if len(t.InputSchema) == 0 {
			return fmt.Errorf("tools.%d.input_schema: Field required", i)
		}
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema.Type != "object" {
			return fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
		}
	}
	tc := r.ToolChoice
	if tc == nil {
		return nil
	}
	switch tc.Type {
	case "auto", "none":
	case "any":
		if len(r.Tools) == 0 {
			return fmt.Errorf("tool_choice: tool_choice may only be specified while providing tools.")
		}
	case "tool":
		if !names[tc.Name] {
			return fmt.Errorf("tool_choice.name: Tool '%s' not found in provided tools", tc.Name)
		}
	default:
		return fmt.Errorf("tool_choice.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
	}
	return nil
}

func validateThinking(r *request) error {
	t := r.Thinking
	if t == nil || t.Type == "disabled" {
		return nil
	}
	if t.Type != "enabled" {
		return fmt.Errorf("thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'disabled'", t.Type)
	}
	switch {
	case t.BudgetTokens < minThinkingBudget:
		return fmt.Errorf("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", minThinkingBudget)
	case t.BudgetTokens >= *r.MaxTokens:
		return fmt.Errorf("max_tokens: `max_tokens` must be greater than `thinking.budget_tokens`")
	case r.Temperature != nil && *r.Temperature != 1:
		return fmt.Errorf("temperature: `temperature` may only be set to 1 when thinking is enabled")
	case r.TopK != nil:
		return fmt.Errorf("top_k: `top_k` must be unset when thinking is enabled")
	case r.ToolChoice != nil && (r.ToolChoice.Type == "tool" || r.ToolChoice.Type == "any"):
		return fmt.Errorf("Thinking may not be enabled when tool_choice forces tool use.")
	}
	return nil
}

func validateCacheControl(r *request) error {
	n := 0
	count := func(c *cacheControl) {
		if c != nil {
			n++
		}
	}
	for _, t := range r.Tools {
		count(t.CacheControl)
	}
	for _, b := range r.system {
		count(b.CacheControl)
	}
	for _, m := range r.Messages {
		for _, b := range m.blocks {
			count(b.CacheControl)
			for _, c := range b.content {
				count(c.CacheControl)
			}
		}
	}
	if n > maxCacheBreakpoints {
		return fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxCacheBreakpoints, n)
	}
	return nil
}

func validateRoles(r *request) error {
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && m.Role != "user" {
			return fmt.Errorf("messages.0.role: first message must use the \"user\" role")
		}
		if i > 0 && r.Messages[i-1].Role == m.Role {
			return fmt.Errorf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		if len(m.blocks) == 0 && i != len(r.Messages)-1 {
			return fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
	}
	return nil
}

// allowedBlocks lists the block types each role may send.
var allowedBlocks = map[string]map[string]bool{
	"user":      {"text": true, "image": true, "tool_result": true},
	"assistant": {"text": true, "thinking": true, "redacted_thinking": true, "tool_use": true},
}

func validateBlocks(r *request) error {
	ids := make(map[string]bool)
	for i, m := range r.Messages {
		for j, b := range m.blocks {
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			if !allowedBlocks[m.Role][b.Type] {
				return fmt.Errorf("%s.type: a %s message may not contain %q blocks", path, m.Role, b.Type)
			}
			if err := validateBlock(b, path); err != nil {
				return err
			}
			if b.Type == "tool_use" {
				if ids[b.ID] {
					return fmt.Errorf("%s: `tool_use` ids must be unique", path)
				}
				ids[b.ID] = true
			}
		}
	}
	return nil
}

func validateBlock(b block, path string) error {
	switch b.Type {
	case "text":
		if strings.TrimSpace(b.text()) == "" {
			return fmt.Errorf("%s.text: text content blocks must contain non-whitespace text", path)
		}
	case "image":
		return validateImage(b.Source, path)
	case "thinking":
		if b.Thinking == nil {
			return fmt.Errorf("%s.thinking.thinking: Field required", path)
		}
		if b.Signature == nil || *b.Signature == "" {
			return fmt.Errorf("%s.thinking.signature: Field required", path)
		}
		if b.CacheControl != nil {
			return fmt.Errorf("%s.thinking.cache_control: cache_control cannot be set on thinking blocks", path)
		}
	case "redacted_thinking":
		if b.Data == nil || *b.Data == "" {
			return fmt.Errorf("%s.redacted_thinking.data: Field required", path)
		}
	case "tool_use":
		if !toolIDRE.MatchString(b.ID) {
			return fmt.Errorf("%s.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		}
		if b.Name == "" {
			return fmt.Errorf("%s.tool_use.name: Field required", path)
		}
		var obj map[string]json.RawMessage
		if len(b.Input) == 0 || json.Unmarshal(b.Input, &obj) != nil || obj == nil {
			return fmt.Errorf("%s.tool_use.input: Input should be a valid dictionary", path)
		}
	case "tool_result":
		if !toolIDRE.MatchString(b.ToolUseID) {
			return fmt.Errorf("%s.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		}
		for k, c := range b.content {
			cpath := fmt.Sprintf("%s.content.%d", path, k)
			if c.Type != "text" && c.Type != "image" {
				return fmt.Errorf("%s.type: tool_result content may only hold text and image blocks", cpath)
			}
			if err := validateBlock(c, cpath); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateImage(src *imageSource, path string) error {
	switch {
	case src == nil:
		return fmt.Errorf("%s.source: Field required", path)
	case src.Type == "url":
		if src.URL == "" {
			return fmt.Errorf("%s.source.url: Field required", path)
		}
	case src.Type == "base64":
		if !imageTypes[src.MediaType] {
			return fmt.Errorf("%s.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", path)
		}
		if _, err := base64.StdEncoding.DecodeString(src.Data); err != nil || src.Data == "" {
			return fmt.Errorf("%s.source.base64.data: invalid base64 data", path)
		}
	default:
		return fmt.Errorf("%s.source.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url'", path, src.Type)
	}
	return nil
}

// validateToolPairing enforces Anthropic's placement rules: every tool_use is
// answered by a tool_result in the very next (user) message, every tool_result
// answers a tool_use of the message right before it, once, and tool_result
// blocks come first in their message.
func validateToolPairing(r *request) error {
	for i, m := range r.Messages {
		var uses []string
		for _, b := range m.blocks {
			if b.Type == "tool_use" {
				uses = append(uses, b.ID)
			}
		}
		if len(uses) > 0 {
			if err := answered(r, i, uses); err != nil {
				return err
			}
		}
		if m.Role != "user" {
			continue
		}
		if err := resultsMatchPrevious(r, i); err != nil {
			return err
		}
	}
	return nil
}

// answered checks that message i+1 holds a tool_result for every id.
func answered(r *request, i int, uses []string) error {
	got := make(map[string]bool)
	if i+1 < len(r.Messages) {
		for _, b := range r.Messages[i+1].blocks {
			if b.Type == "tool_result" {
				got[b.ToolUseID] = true
			}
		}
	}
	var missing []string
	for _, id := range uses {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
	}
	return nil
}

// resultsMatchPrevious checks user message i's tool_result blocks.
func resultsMatchPrevious(r *request, i int) error {
	prev := make(map[string]bool)
	if i > 0 {
		for _, b := range r.Messages[i-1].blocks {
			if b.Type == "tool_use" {
				prev[b.ID] = true
			}
		}
	}
	seen := make(map[string]bool)
	other := false
	for j, b := range r.Messages[i].blocks {
		if b.Type != "tool_result" {
			other = true
			continue
		}
		path := fmt.Sprintf("messages.%d.content.%d", i, j)
		switch {
		case len(prev) == 0:
			return fmt.Errorf("%s: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks", path)
		case !prev[b.ToolUseID]:
			return fmt.Errorf("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", path, b.ToolUseID)
		case seen[b.ToolUseID]:
			return fmt.Errorf("%s: each `tool_use` may only have one `tool_result`; found a second for %s", path, b.ToolUseID)
		case other:
			return fmt.Errorf("%s: `tool_result` blocks must come before any other content in a user message", path)
		}
		seen[b.ToolUseID] = true
	}
	return nil
}

// validateThinkingWithTools: with thinking on, an assistant turn still in its
// tool loop (the request ends with its tool results) must be replayed with
// the thinking block it began with.
func validateThinkingWithTools(r *request) error {
	if r.Thinking == nil || r.Thinking.Type != "enabled" {
		return nil
	}
	n := len(r.Messages)
	if n < 2 {
		return nil
	}
	last := r.Messages[n-1]
	if last.Role != "user" || len(last.blocks) == 0 || last.blocks[0].Type != "tool_result" {
		return nil
	}
	prev := r.Messages[n-2]
	if first := prev.blocks[0].Type; first != "thinking" && first != "redacted_thinking" {
		return fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks).", n-2, first)
	}
	return nil
}

// validateSignatures refuses a thinking block whose text differs from what
// this server signed.
func (s *Server) validateSignatures(r *request) error {
	for i, m := range r.Messages {
		for j, b := range m.blocks {
			if b.Type == "thinking" && !s.signed(*b.Signature, *b.Thinking) {
				return fmt.Errorf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	return nil
}
