package llm

import (
	"encoding/json"
	"fmt"
	"time"
)

// Role says who authored a Message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// PartKind names the kind of a Part.
type PartKind string

const (
	PartText       PartKind = "text"
	PartThinking   PartKind = "thinking"
	PartToolCall   PartKind = "tool_call"
	PartToolResult PartKind = "tool_result"
	PartImage      PartKind = "image"
	PartFileRef    PartKind = "file_ref"
)

// Message is one entry of a conversation. Parts keep their order; which kinds
// a role may hold is checked by Validate.
type Message struct {
	Role  Role      `json:"role"`
	Parts []Part    `json:"parts"`
	Time  time.Time `json:"time,omitzero"`
	Meta  *Meta     `json:"meta,omitempty"`
}

// Meta records where an assistant message came from and what it cost
// (docs/routing.md#what-the-caller-sees), plus small per-message facts other
// roles may carry.
type Meta struct {
	// Route is the route name or "provider/model" string that was asked for.
	Route string `json:"route,omitempty"`
	// Provider is the configured provider name that answered (providers.<name>).
	Provider string `json:"provider,omitempty"`
	// API is the wire protocol used: the provider's kind
	// (providers.<name>.kind).
	API string `json:"api,omitempty"`
	// Model is the provider's model id.
	Model string `json:"model,omitempty"`
	Usage Usage  `json:"usage,omitzero"`
	// StopReason is why the model stopped, normalised (see StopReason).
	StopReason StopReason `json:"stop_reason,omitempty"`
	// Synthetic marks messages the program wrote itself (e.g. a placeholder or
	// a "tool limit reached" answer) rather than a model.
	Synthetic bool `json:"synthetic,omitempty"`
	// MessageIDs are the platform ids of the inbound messages a user message
	// was made from, so that a message the platform delivers again after a
	// crash is recognised rather than answered twice.
	MessageIDs []string `json:"message_ids,omitempty"`
}

// Usage counts tokens of one model call (or the sum of several).
type Usage struct {
	InputTokens      int `json:"input,omitempty"`
	OutputTokens     int `json:"output,omitempty"`
	CacheReadTokens  int `json:"cache_read,omitempty"`
	CacheWriteTokens int `json:"cache_write,omitempty"`
	ReasoningTokens  int `json:"reasoning,omitempty"`
}

// Add returns the field-wise sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Part is one piece of a message. Exactly the field(s) belonging to Kind are set.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text holds the text of a text part, the reasoning of a thinking part, or
	// the opaque payload of a redacted thinking part.
	Text string `json:"text,omitempty"`
	// Summary and Gist are shorter renderings of a large user text
	// (docs/history.md#levels-of-detail); empty means "same as the next fuller
	// rendering".
	Summary string `json:"summary,omitempty"`
	Gist    string `json:"gist,omitempty"`
	// Signature is the provider's signature over a thinking part or a
	// tool_call part (over the reasoning that led to the call); it is
	// replayed verbatim to the API that produced it and never interpreted
	// (docs/history.md#thinking).
	Signature string `json:"signature,omitempty"`
	// Redacted marks a thinking part whose Text is an encrypted payload.
	Redacted bool        `json:"redacted,omitempty"`
	Call     *ToolCall   `json:"call,omitempty"`
	Result   *ToolResult `json:"result,omitempty"`
	Image    *Image      `json:"image,omitempty"`
	File     *FileRef    `json:"file,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the parsed argument object; nil when ParseError is set.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// RawArgs keeps the model's text when it did not parse as a JSON object.
	RawArgs    string `json:"raw_args,omitempty"`
	ParseError string `json:"parse_error,omitempty"`
}

// ToolResult is the outcome of one ToolCall.
type ToolResult struct {
	ToolCallID string  `json:"tool_call_id"`
	Name       string  `json:"name"`
	IsError    bool    `json:"is_error,omitempty"`
	Content    Content `json:"content"`
	// Images produced by the tool (e.g. an MCP server's image content).
	Images  []Image       `json:"images,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
}

// Image is a picture given to (or produced for) a model. One of Data, URL or
// Path is set; Path is relative to the workspace.
type Image struct {
	MIME string `json:"mime"`
	Data []byte `json:"data,omitempty"`
	URL  string `json:"url,omitempty"`
	Path string `json:"path,omitempty"`
}

// FileRef points at a file the user sent, saved in the workspace.
type FileRef struct {
	Path string `json:"path"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size,omitempty"`
	Name string `json:"name,omitempty"`
}

// Text returns a text part.
func Text(s string) Part { return Part{Kind: PartText, Text: s} }

// NewText returns a message of role r holding one text part.
func NewText(r Role, s string) Message {
	return Message{Role: r, Parts: []Part{Text(s)}}
}

// Text concatenates the message's text parts (thinking excluded).
func (m Message) Text() string {
	var n int
	for _, p := range m.Parts {
		if p.Kind == PartText {
			n += len(p.Text)
		}
	}
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, n)
	for _, p := range m.Parts {
		if p.Kind == PartText {
			b = append(b, p.Text...)
		}
	}
	return string(b)
}

// ToolCalls returns the message's tool calls in order.
func (m Message) ToolCalls() []ToolCall {
	return partsOf(m, PartToolCall, func(p Part) *ToolCall { return p.Call })
}

// ToolResults returns the message's tool results in order.
func (m Message) ToolResults() []ToolResult {
	return partsOf(m, PartToolResult, func(p Part) *ToolResult { return p.Result })
}

// partsOf returns, in order, what field holds in each part of m of the
// given kind, skipping a part where it holds nothing.
func partsOf[T any](m Message, kind PartKind, field func(Part) *T) []T {
	var out []T
	for _, p := range m.Parts {
		if v := field(p); p.Kind == kind && v != nil {
			out = append(out, *v)
		}
	}
	return out
}

var allowedParts = map[Role]map[PartKind]bool{
	RoleSystem:    {PartText: true},
	RoleUser:      {PartText: true, PartImage: true, PartFileRef: true},
	RoleAssistant: {PartText: true, PartThinking: true, PartToolCall: true},
	RoleTool:      {PartToolResult: true},
}

// Validate checks the role and that every part is allowed for it and carries
// the payload its kind needs (docs/sessions.md#records).
func (m Message) Validate() error {
	allowed, ok := allowedParts[m.Role]
	if !ok {
		return fmt.Errorf("unknown role %q", m.Role)
	}
	for i, p := range m.Parts {
		if !allowed[p.Kind] {
			return fmt.Errorf("part %d: kind %q not allowed in a %s message", i, p.Kind, m.Role)
		}
		if err := p.validate(); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	if m.Role == RoleTool && len(m.Parts) == 0 {
		return fmt.Errorf("tool message without results")
	}
	if m.Role == RoleAssistant && len(m.Parts) == 0 {
		// Replayed to a model it reads as an answer of nothing, and some
		// servers refuse it outright
		// (docs/reliability.md#every-turn-ends-with-something-to-read).
		return fmt.Errorf("assistant message without parts")
	}
	return nil
}

func (p Part) validate() error {
	switch p.Kind {
	case PartToolCall:
		if p.Call == nil || p.Call.ID == "" || p.Call.Name == "" {
			return fmt.Errorf("tool_call needs id and name")
		}
	case PartToolResult:
		if p.Result == nil || p.Result.ToolCallID == "" {
			return fmt.Errorf("tool_result needs tool_call_id")
		}
	case PartImage:
		if p.Image == nil || (len(p.Image.Data) == 0 && p.Image.URL == "" && p.Image.Path == "") {
			return fmt.Errorf("image needs data, url or path")
		}
	case PartFileRef:
		if p.File == nil || p.File.Path == "" {
			return fmt.Errorf("file_ref needs a path")
		}
	}
	return nil
}
