// Package tools is what the agent's model can do besides talking: the Tool
// interface, the Registry that validates a model's tool calls and runs them
// safely (docs/tools.md#every-call-the-registry), and the built-in tools
// (docs/tools.md#the-built-in-tools), one file each: read_file, write_file,
// edit_file, list_dir, exec and message.
//
// The agent owns a Registry, hands its Specs to the model and passes every
// tool call to Execute, which always returns a result and never panics. File
// tools reach the disk only through a workspace.Root, which confines them
// (docs/tools.md). Other tools (web, spawn, cron, MCP) live in their own
// packages and only need to implement Tool.
package tools

import (
	"context"
	"encoding/json"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Origin says where the tool call comes from: the chat of the turn that made
// it. Tools that talk back (message) or schedule work (cron, spawn) use it.
type Origin struct {
	Channel    string
	ChatID     string
	SenderID   string
	SessionKey string
	TurnID     string
	// MessageID is the platform id of the user message being answered.
	MessageID string
	// Group is the inbound message's group ("" for a direct message), so
	// work the tool starts (a subagent) shares that group's model slots.
	Group string
	// Metadata is the inbound message's routing metadata (thread, topic...),
	// to be echoed on anything sent back to the same chat.
	Metadata map[string]string
}

// Invocation is one call of a tool.
type Invocation struct {
	CallID string
	// Args is a JSON object already validated against the tool's schema,
	// with simple casts applied ("5" -> 5 where the schema says integer).
	Args   json.RawMessage
	Origin Origin
}

// Result is what a tool reports back to the model.
type Result struct {
	Text string
	// IsError marks a failure the model should see as one. Returning an error
	// from Run has the same effect with the error's text.
	IsError bool
	// Images produced by the tool, shown to models that accept images.
	Images []llm.Image
}

// Tool is one capability offered to the model.
type Tool interface {
	// Spec names and describes the tool and gives its JSON schema. It must
	// return the same value every time: specs go into the prompt, and any
	// change defeats the provider's prompt cache.
	Spec() llm.ToolSpec
	// Run executes one call. It must honour ctx (the Registry's timeout and
	// the turn's cancellation). An error is reported to the model as an
	// error result, so its text should say what to do differently.
	Run(ctx context.Context, inv Invocation) (Result, error)
}

// ReadOnlyTool is an optional capability: a tool whose ReadOnly reports true
// changes nothing, so several of its calls in one model turn may run in
// parallel.
type ReadOnlyTool interface {
	ReadOnly() bool
}

// IsReadOnly reports whether t declares itself read-only.
func IsReadOnly(t Tool) bool {
	ro, ok := t.(ReadOnlyTool)
	return ok && ro.ReadOnly()
}

// errorResult builds an error result, for failures whose text a tool wants to
// control exactly.
func errorResult(text string) Result { return Result{Text: text, IsError: true} }
