// Package llm is the provider-neutral vocabulary of a conversation: messages and
// their parts, the streamed deltas providers emit, the Accumulator that turns a
// delta stream into one assistant message, token usage and tool specs.
//
// It is a leaf: it imports nothing of this module, so sessions, tools, providers
// and the agent can all speak it without import cycles.
package llm
