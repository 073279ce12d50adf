package llm

import "encoding/json"

// ToolSpec describes a tool to a model: its name, what it does, and a JSON
// schema object for its parameters.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one provider-neutral model call. Providers translate it to their
// wire format; Model is the provider's own model id (the route is resolved
// before a request reaches a provider).
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []ToolSpec
	// ForceTool, when set, requires the model to call that tool.
	ForceTool string
	// MaxTokens caps the reply; 0 leaves the provider's default.
	MaxTokens int
	// Temperature is nil for the provider's default.
	Temperature *float64
	// ReasoningEffort is "", "low", "medium" or "high" for models that reason.
	ReasoningEffort string
	// ThinkingBudget enables extended thinking (where the protocol has a budget) with this many tokens.
	ThinkingBudget int
	// EmptyOK says an answer of nothing is a valid end for the caller (the
	// turn already answered through the message tool), so it is not asked
	// again (see Check). Adapters ignore it.
	EmptyOK bool
	// Fit, when set, makes Messages for the limits of the route the call
	// goes to: the router calls it once for each route it tries, the
	// default and every fallback, before that route's first attempt, so a
	// fallback with a smaller window is sent a history projected for its
	// own window and reply cap, not the one made for the route that failed
	// (docs/routing.md#routes). Messages is then ignored. Adapters never
	// see it.
	Fit func(Limits) []Message
}

// Limits are what a route allows one call: its context window and the cap
// on the reply, both in tokens.
type Limits struct {
	ContextWindow int
	MaxTokens     int
}
