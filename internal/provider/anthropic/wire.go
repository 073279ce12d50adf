package anthropic

import "encoding/json"

// The Messages API's JSON, as far as the adapter uses it (anthropic-version
// 2023-06-01: POST /v1/messages streamed, GET /v1/models). Field order
// follows the API reference's (required fields first, type last), so the
// payloads read like the documentation's examples.

type wireRequest struct {
	MaxTokens   int             `json:"max_tokens"`
	Messages    []wireMessage   `json:"messages"`
	Model       string          `json:"model"`
	Temperature *float64        `json:"temperature,omitempty"`
	System      []wireBlock     `json:"system,omitempty"`
	Thinking    *wireThinking   `json:"thinking,omitempty"`
	ToolChoice  *wireToolChoice `json:"tool_choice,omitempty"`
	Tools       []wireTool      `json:"tools,omitempty"`
	Stream      bool            `json:"stream"`
}

type wireMessage struct {
	Content []wireBlock `json:"content"`
	Role    string      `json:"role"`
}

// Block types, as Type holds them.
const (
	blockText             = "text"
	blockImage            = "image"
	blockToolUse          = "tool_use"
	blockToolResult       = "tool_result"
	blockThinking         = "thinking"
	blockRedactedThinking = "redacted_thinking"
)

// wireBlock is one content block of a request; Type says which fields it
// uses: text (Text), image (Source), tool_use (ID, Input, Name),
// tool_result (ToolUseID, IsError, Content), thinking (Signature,
// Thinking), redacted_thinking (Data). Thinking is a pointer because the
// API requires the field even when the thinking text is empty.
type wireBlock struct {
	Text         string            `json:"text,omitempty"`
	Source       *wireImageSource  `json:"source,omitempty"`
	ID           string            `json:"id,omitempty"`
	Input        json.RawMessage   `json:"input,omitempty"`
	Name         string            `json:"name,omitempty"`
	ToolUseID    string            `json:"tool_use_id,omitempty"`
	IsError      bool              `json:"is_error,omitempty"`
	Signature    string            `json:"signature,omitempty"`
	Thinking     *string           `json:"thinking,omitempty"`
	Data         string            `json:"data,omitempty"`
	CacheControl *wireCacheControl `json:"cache_control,omitempty"`
	Content      []wireBlock       `json:"content,omitempty"`
	Type         string            `json:"type"`
}

// wireImageSource is base64 data (Data, MediaType) or a URL.
type wireImageSource struct {
	Data      string `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	URL       string `json:"url,omitempty"`
	Type      string `json:"type"`
}

type wireCacheControl struct {
	Type string `json:"type"`
}

// ephemeral is the prompt-cache breakpoint (five minutes).
func ephemeral() *wireCacheControl { return &wireCacheControl{Type: "ephemeral"} }

type wireThinking struct {
	BudgetTokens int    `json:"budget_tokens"`
	Type         string `json:"type"`
}

type wireToolChoice struct {
	Name string `json:"name,omitempty"`
	Type string `json:"type"`
}

// wireTool sends the tool's JSON schema as it came (json.RawMessage).
type wireTool struct {
	InputSchema json.RawMessage `json:"input_schema"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
}

// wireEvent is the data of one stream event; Type says which fields it
// uses: message_start (Message), content_block_start (Index,
// ContentBlock), content_block_delta (Index, Delta), content_block_stop
// (Index), message_delta (Delta's stop reason, Usage), message_stop.
type wireEvent struct {
	Type         string           `json:"type"`
	Message      wireStartMessage `json:"message"`
	Index        int              `json:"index"`
	ContentBlock wireOutBlock     `json:"content_block"`
	Delta        wireDelta        `json:"delta"`
	Usage        wireUsage        `json:"usage"`
}

type wireStartMessage struct {
	Model string    `json:"model"`
	Usage wireUsage `json:"usage"`
}

// wireOutBlock is a content block as the server starts it.
type wireOutBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// wireDelta is a content block's delta (Type set) or, in message_delta,
// the message's stop reason.
type wireDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// wireUsage counts are cumulative; fields the server leaves out or sends
// as null count zero.
type wireUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// wireErrorBody is Anthropic's error envelope, the body of an HTTP refusal
// and the data of an `event: error`.
type wireErrorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type wireModelList struct {
	Data []struct {
		ID string `json:"id"`
	} `json:"data"`
}
