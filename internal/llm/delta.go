package llm

import (
	"errors"
	"fmt"
	"time"
)

// DeltaKind names the kind of a streamed Delta.
type DeltaKind uint8

const (
	// DeltaStart opens a stream; it carries Meta (provider, api, model).
	DeltaStart DeltaKind = iota + 1
	// DeltaText appends Text to the reply.
	DeltaText
	// DeltaThinking appends Text to the reasoning and may carry its Signature
	// (or, with Redacted, an opaque payload).
	DeltaThinking
	// DeltaToolCallStart opens tool call CallID named Name; it may carry a
	// Signature (Gemini's thought signature over the call).
	DeltaToolCallStart
	// DeltaToolCallArgs appends the fragment Args to CallID's arguments.
	DeltaToolCallArgs
	// DeltaToolCallEnd closes CallID; its arguments are parsed then.
	DeltaToolCallEnd
	// DeltaUsage reports token usage; several are summed.
	DeltaUsage
	// DeltaDone ends the stream successfully, with its normalised StopReason.
	DeltaDone
	// DeltaError ends the stream with Err.
	DeltaError
)

var deltaKindNames = [...]string{
	DeltaStart: "start", DeltaText: "text", DeltaThinking: "thinking",
	DeltaToolCallStart: "tool_call_start", DeltaToolCallArgs: "tool_call_args",
	DeltaToolCallEnd: "tool_call_end", DeltaUsage: "usage", DeltaDone: "done", DeltaError: "error",
}

func (k DeltaKind) String() string {
	if int(k) < len(deltaKindNames) && deltaKindNames[k] != "" {
		return deltaKindNames[k]
	}
	return fmt.Sprintf("DeltaKind(%d)", uint8(k))
}

// Terminal reports whether k ends a stream.
func (k DeltaKind) Terminal() bool { return k == DeltaDone || k == DeltaError }

// Delta is one event of a provider stream. Only the fields of its Kind are set.
type Delta struct {
	Seq        int
	Kind       DeltaKind
	Text       string
	Signature  string
	Redacted   bool
	CallID     string
	Name       string
	Args       string
	Usage      Usage
	Meta       *Meta
	StopReason StopReason
	Err        error
}

// ErrIncomplete means a stream ended without a terminal delta.
var ErrIncomplete = errors.New("stream ended without a terminal delta")

// ErrTruncated means the provider's stream stopped before it said it was
// finished (no finish reason / message_stop). It is retryable.
var ErrTruncated = errors.New("provider stream truncated")

// ContractError reports a stream that broke the delta contract.
type ContractError struct {
	Seq    int
	Kind   DeltaKind
	Reason string
}

func (e *ContractError) Error() string {
	return fmt.Sprintf("delta contract violated at seq %d (%s): %s", e.Seq, e.Kind, e.Reason)
}

// APIError is a provider's refusal, classified so the router knows whether
// to retry, fall back or give up.
type APIError struct {
	Provider string
	// Status is the HTTP status, 0 when the failure was not an HTTP answer.
	Status  int
	Type    string // provider's error type/code, e.g. "overloaded_error"
	Message string
	// RetryAfter is the server's requested wait (Retry-After header or body).
	RetryAfter time.Duration
	Err        error
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Status == 0 {
		return fmt.Sprintf("%s: %s", e.Provider, msg)
	}
	if e.Type != "" {
		return fmt.Sprintf("%s: status %d %s: %s", e.Provider, e.Status, e.Type, msg)
	}
	return fmt.Sprintf("%s: status %d: %s", e.Provider, e.Status, msg)
}

func (e *APIError) Unwrap() error { return e.Err }

// Retryable reports whether the same request may succeed later: rate limits,
// timeouts, conflicts, server errors and overload, and failures that were
// not an HTTP answer (transport errors, error events mid-stream) unless
// their type names a client error. Never authentication or validation
// errors, and not an exhausted quota (see QuotaExceeded). 409 is retried as
// the official OpenAI and Anthropic SDKs do (a conflict on the provider's
// side, e.g. a lock timeout).
func (e *APIError) Retryable() bool {
	switch {
	case e.QuotaExceeded():
		return false
	case e.Status == 429, e.Status == 408, e.Status == 409, e.Status >= 500:
		return true
	case e.Type == "overloaded_error", e.Type == "rate_limit_error", e.Type == "api_error", e.Type == "server_error":
		return true
	case e.Status == 0:
		return !clientErrorTypes[e.Type]
	}
	return false
}

// clientErrorTypes are error types (OpenAI's and Anthropic's) that say the
// request itself was refused; they may arrive without a status inside a
// stream.
var clientErrorTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true,
	"not_found_error": true, "request_too_large": true, "invalid_api_key": true,
	"context_length_exceeded": true, "insufficient_quota": true, "billing_error": true,
	// Google's canonical codes (Gemini), and its reason for a bad key.
	"INVALID_ARGUMENT": true, "FAILED_PRECONDITION": true, "PERMISSION_DENIED": true,
	"UNAUTHENTICATED": true, "NOT_FOUND": true, "API_KEY_INVALID": true,
}

// Auth reports whether the key was refused; fallbacks are not tried for it.
// Gemini refuses a bad key with 400 and the reason API_KEY_INVALID.
func (e *APIError) Auth() bool {
	return e.Status == 401 || e.Status == 403 || e.Type == "authentication_error" ||
		e.Type == "permission_error" || e.Type == "invalid_api_key" ||
		e.Type == "API_KEY_INVALID" || e.Type == "UNAUTHENTICATED" || e.Type == "PERMISSION_DENIED"
}

// QuotaExceeded reports an exhausted quota or billing problem (OpenAI
// answers 429 insufficient_quota): retrying the same provider soon cannot
// help, another provider may.
func (e *APIError) QuotaExceeded() bool {
	return e.Type == "insufficient_quota" || e.Type == "billing_error"
}
