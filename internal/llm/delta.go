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
	// Signature (the provider's signature over the reasoning that led to it).
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
// to retry, fall back or give up. The adapter that built it knows its
// vendor's error codes and says what they mean in Kind; this package knows
// no vendor and reads only the HTTP status when Kind is empty (StatusKind).
type APIError struct {
	Provider string
	// Status is the HTTP status, 0 when the failure was not an HTTP answer.
	Status int
	// Type is the provider's own error type or code, kept for the log
	// ("overloaded_error"); Kind says what it means.
	Type    string
	Message string
	// RetryAfter is the server's requested wait (Retry-After header or body).
	RetryAfter time.Duration
	// Kind is the adapter's reading of the refusal, one of the refusal rows
	// of the failure table: KindAuth, KindQuota, KindRateLimit, KindTooLong,
	// KindTimeout, KindUnavailable or KindRejected. Empty: Status decides.
	Kind Kind
	Err  error
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

// kind is the row e falls in: the adapter's Kind, else its status's.
func (e *APIError) kind() Kind {
	if e.Kind != "" {
		return e.Kind
	}
	return StatusKind(e.Status)
}

// StatusKind is what an HTTP status alone says about a refusal, for a
// refusal whose body the adapter does not know: 401 and 403 a refused key,
// 429 a rate limit, 408, 409 (a conflict on the provider's side, retried as
// the official SDKs do) and 5xx trouble on the provider's side, any other
// status a refused request. Status 0 (no HTTP answer: a transport error, an
// error event mid-stream) is trouble on the provider's side too; the
// failure table tells an unreachable server from it by the wrapped error.
func StatusKind(status int) Kind {
	switch {
	case status == 401, status == 403:
		return KindAuth
	case status == 429:
		return KindRateLimit
	case status == 0, status == 408, status == 409, status >= 500:
		return KindUnavailable
	}
	return KindRejected
}

// Retryable reports whether the same request may succeed later (the
// failure table retries it): rate limits, timeouts, trouble on the
// provider's side. Never a refused key or request, and not an exhausted
// quota (see QuotaExceeded).
func (e *APIError) Retryable() bool { return PolicyOf(e.kind()).Retry != RetryNo }

// Auth reports whether the key was refused; fallbacks are not tried for it.
func (e *APIError) Auth() bool { return e.kind() == KindAuth }

// QuotaExceeded reports an exhausted quota or billing problem: retrying
// the same provider soon cannot help, another provider may.
func (e *APIError) QuotaExceeded() bool { return e.kind() == KindQuota }
