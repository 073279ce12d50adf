package llm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// This file is the one place that says what a failed model call means, and
// what an answer that stopped short means: whether the router retries it or
// falls back, whether the circuit breaker and the readiness check count it,
// the metric label, a reason safe for logs, /status and the API, and the
// sentence the user reads. The router, the metrics, the readiness check, the
// agent's answers and /status all read Policies; none decides on its own.
// docs/routing.md shows the table.

// Kind names what went wrong with a model call, or why its answer stopped
// short.
type Kind string

const (
	// KindOK: the call succeeded and the answer is whole.
	KindOK Kind = "ok"
	// KindCancelled: the caller cancelled (/stop, shutdown). A stop, not a
	// failure: it says nothing about the provider.
	KindCancelled Kind = "cancelled"
	// KindDeadline: the caller's own deadline passed (context.DeadlineExceeded
	// not wrapped in an APIError, e.g. a subagent's timeout). Treated like a
	// cancellation: nothing is left of the caller's time to retry or fall
	// back with, and the time may have gone to tools, so it says nothing
	// sure about the provider. The provider's own timeout is KindTimeout.
	KindDeadline Kind = "deadline"
	// KindAuth: the key was refused (401/403, or a code its adapter reads as one).
	KindAuth Kind = "auth"
	// KindQuota: the account's quota or billing is exhausted.
	KindQuota Kind = "quota"
	// KindRateLimit: 429 or a rate-limit error type; RetryAfter holds the
	// server's requested wait.
	KindRateLimit Kind = "rate_limit"
	// KindTooLong: the request does not fit the model's context window.
	KindTooLong Kind = "context_too_long"
	// KindTimeout: no complete answer within the provider's configured
	// timeout (an APIError of type "timeout").
	KindTimeout Kind = "timeout"
	// KindUnreachable: the server could not be reached at all (DNS,
	// refused or reset connection, TLS): see Unreachable.
	KindUnreachable Kind = "unreachable"
	// KindUnavailable: the provider failed on its side: 5xx, overload, 408,
	// 409, an error event mid-stream, a transport error after connecting.
	KindUnavailable Kind = "unavailable"
	// KindTruncated: the stream stopped before the provider said it was
	// finished (ErrTruncated, ErrIncomplete).
	KindTruncated Kind = "truncated"
	// KindRejected: the provider refused this request (400, 404, 413, 422,
	// a client error type).
	KindRejected Kind = "rejected"
	// KindUnusable: the answer arrived whole but is empty or holds a
	// malformed tool call (AnswerError).
	KindUnusable Kind = "unusable_answer"
	// KindBroken: the stream broke the delta contract (an adapter bug).
	KindBroken Kind = "broken_stream"
	// KindUnknown: anything else (an unknown route, a request the adapter
	// could not build).
	KindUnknown Kind = "unknown"

	// The stops: answers that arrived and are shown, with a note.

	// KindLength: cut at the output token limit (StopLength).
	KindLength Kind = "length"
	// KindRefusal: the model declined (StopRefusal).
	KindRefusal Kind = "refusal"
	// KindSafety: a safety filter stopped the answer (StopSafety).
	KindSafety Kind = "safety"
	// KindRecitation: withheld for quoting protected text (StopRecitation).
	KindRecitation Kind = "recitation"
	// KindBudget: the usage budget is spent (*BudgetError); no call was
	// made.
	KindBudget Kind = "budget"
)

// Retry is what the router does next on the same route.
type Retry uint8

const (
	// RetryNo: the same route is not asked again.
	RetryNo Retry = iota
	// RetryBackoff: asked again after a backoff (or the server's
	// Retry-After), up to the provider's max_retries.
	RetryBackoff
	// RetryOnce: asked once more at once (not with max_retries: 0).
	RetryOnce
)

func (r Retry) String() string {
	switch r {
	case RetryBackoff:
		return "with backoff"
	case RetryOnce:
		return "once, at once"
	}
	return "no"
}

// Signal is what a call's outcome says about the provider, for the circuit
// breaker and for readiness.
type Signal uint8

const (
	// SignalNone: nothing (the caller gave up): not counted either way.
	SignalNone Signal = iota
	// SignalUp: the provider answered, if only to refuse this request.
	SignalUp
	// SignalDown: the provider cannot serve requests right now.
	SignalDown
)

func (s Signal) String() string {
	switch s {
	case SignalUp:
		return "up"
	case SignalDown:
		return "down"
	}
	return "—"
}

// Policy is one row of the table: everything that follows from a Kind.
type Policy struct {
	Kind Kind
	// Retry: whether the same route is asked again.
	Retry Retry
	// Fallback: whether the route's fallbacks are tried after it.
	Fallback bool
	// Breaker: how the route's circuit breaker counts the call (Down only
	// once the retries are used up).
	Breaker Signal
	// Health: how the readiness check (/readyz, /status) counts it.
	Health Signal
	// Metric is the outcome label of nanobot_llm_calls_total.
	Metric string
	// Reason is a short clause safe for logs, /status and the API: it never
	// holds a URL, a key or the provider's own words.
	Reason string
	// User is the sentence the user reads; a %s takes the detail (the host
	// that could not be reached, the provider's message).
	User string
	// Note is appended to a text a stop cut short (stops only).
	Note string
}

// Metric labels of nanobot_llm_calls_total (docs/operations.md).
const (
	MetricOK          = "ok"
	MetricCancelled   = "cancelled"
	MetricDeadline    = "deadline"
	MetricAuth        = "auth"
	MetricQuota       = "quota"
	MetricRateLimited = "rate_limited"
	MetricUnavailable = "unavailable"
	MetricRejected    = "rejected"
	MetricUnusable    = "unusable"
	MetricError       = "error"
	MetricBudget      = "budget"
)

// tryLater ends the sentences of failures that usually pass;
// somethingWrong is the sentence for failures only the log explains.
const (
	tryLater       = " Please try again in a moment."
	somethingWrong = "⚠️ Something went wrong while answering; the details are in the daemon log."
)

// Policies is the table, one row per Kind.
var Policies = []Policy{
	{Kind: KindOK, Breaker: SignalUp, Health: SignalUp, Metric: MetricOK, Reason: "answered"},
	{Kind: KindCancelled, Metric: MetricCancelled, Reason: "cancelled",
		User: "⚠️ The answer was cancelled."},
	{Kind: KindDeadline, Metric: MetricDeadline, Reason: "time ran out before the model answered",
		User: "⚠️ The model took too long to answer. Please try again."},
	{Kind: KindAuth, Breaker: SignalUp, Health: SignalDown, Metric: MetricAuth,
		Reason: "the model provider refused the API key",
		User:   "⚠️ The model provider refused the API key. The operator needs to check the provider's api_key in the config."},
	{Kind: KindQuota, Fallback: true, Breaker: SignalUp, Health: SignalDown, Metric: MetricQuota,
		Reason: "the model provider's quota is used up",
		User:   "⚠️ The model provider says the account's quota is used up. The operator needs to check the provider account's billing."},
	{Kind: KindRateLimit, Retry: RetryBackoff, Fallback: true, Breaker: SignalDown, Health: SignalUp, Metric: MetricRateLimited,
		Reason: "the model provider is rate-limiting",
		User:   "⚠️ The model provider is rate-limiting me right now. Please try again in a minute."},
	{Kind: KindTooLong, Breaker: SignalUp, Health: SignalUp, Metric: MetricRejected,
		Reason: "the conversation is too long for the model",
		User: "⚠️ This conversation is too long for the model. Send /new to start a new one; " +
			"the operator can check agents.context_window."},
	{Kind: KindTimeout, Retry: RetryBackoff, Fallback: true, Breaker: SignalDown, Health: SignalDown, Metric: MetricUnavailable,
		Reason: "the model provider took too long",
		User:   "⚠️ The model took too long to answer." + tryLater},
	{Kind: KindUnreachable, Retry: RetryBackoff, Fallback: true, Breaker: SignalDown, Health: SignalDown, Metric: MetricUnavailable,
		Reason: "the model provider cannot be reached",
		User: "⚠️ The model provider did not answer: %s. Please try again in a moment; " +
			"if it persists, the operator needs to check the provider's base_url and the network."},
	{Kind: KindUnavailable, Retry: RetryBackoff, Fallback: true, Breaker: SignalDown, Health: SignalDown, Metric: MetricUnavailable,
		Reason: "the model provider is having trouble",
		User:   "⚠️ The model provider is having trouble right now." + tryLater},
	{Kind: KindTruncated, Retry: RetryBackoff, Fallback: true, Breaker: SignalDown, Health: SignalDown, Metric: MetricUnavailable,
		Reason: "the model's answer was cut off",
		User:   "⚠️ The model's answer was cut off. Please try again."},
	{Kind: KindRejected, Breaker: SignalUp, Health: SignalUp, Metric: MetricRejected,
		Reason: "the model provider rejected the request",
		User:   "⚠️ The model provider rejected the request (%s)."},
	{Kind: KindUnusable, Retry: RetryOnce, Fallback: true, Breaker: SignalUp, Health: SignalUp, Metric: MetricUnusable,
		Reason: "the model did not answer usably",
		User:   "⚠️ The model sent an empty or broken answer, also when asked again. Please try again, perhaps in other words."},
	{Kind: KindBroken, Breaker: SignalUp, Health: SignalUp, Metric: MetricError,
		Reason: "the model's answer stream was broken",
		User:   somethingWrong},
	{Kind: KindBudget, Metric: MetricBudget, Reason: "the usage budget is spent",
		User: "⚠️ %s"},
	{Kind: KindUnknown, Breaker: SignalUp, Health: SignalUp, Metric: MetricError,
		Reason: "an error the daemon log shows",
		User:   somethingWrong},

	{Kind: KindLength, Breaker: SignalUp, Health: SignalUp, Metric: MetricOK, Reason: "the model hit its output limit",
		Note: "… (cut off: the model hit its output limit)",
		User: "⚠️ The model hit its output limit before it wrote an answer. Ask again, perhaps for something shorter; " +
			"the operator can raise agents.max_tokens."},
	{Kind: KindRefusal, Breaker: SignalUp, Health: SignalUp, Metric: MetricOK, Reason: "the model declined",
		Note: "… (the model declined to go on)",
		User: "⚠️ The model declined to answer this."},
	{Kind: KindSafety, Breaker: SignalUp, Health: SignalUp, Metric: MetricOK, Reason: "a safety filter withheld the answer",
		Note: "… (stopped by the model provider's safety filter)",
		User: "⚠️ The model provider's safety filter withheld the answer."},
	{Kind: KindRecitation, Breaker: SignalUp, Health: SignalUp, Metric: MetricOK, Reason: "the answer would have quoted protected text",
		Note: "… (stopped: the answer would have quoted protected text)",
		User: "⚠️ The model provider withheld the answer because it would have quoted protected text."},
}

// PolicyOf returns the row of kind (KindUnknown's for a kind not in the
// table).
func PolicyOf(kind Kind) Policy {
	for _, p := range Policies {
		if p.Kind == kind {
			return p
		}
	}
	return PolicyOf(KindUnknown)
}

// stopKinds maps the stop reasons that need a word to their kinds; the
// others (stop, tool_calls, other) are plain answers, and empty answers and
// malformed calls are AnswerErrors (CheckAnswer).
var stopKinds = map[StopReason]Kind{
	StopLength: KindLength, StopRefusal: KindRefusal, StopSafety: KindSafety, StopRecitation: KindRecitation,
}

// BudgetError refuses a model call because a usage budget is spent
// (internal/usage). Text is the sentence the chat reads: which budget,
// when it resets, where to look. Nothing was called, so nothing is retried
// or counted against the provider.
type BudgetError struct {
	Text string
}

func (e *BudgetError) Error() string { return "usage budget spent: " + e.Text }

// Failure is a classified outcome: the row of its kind and what the error
// itself said.
type Failure struct {
	Policy
	// Detail is safe to show: the unreachable host and why, "primary answered
	// HTTP 503", the provider's timeout.
	Detail string
	// RetryAfter is the wait the server asked for (0 when none).
	RetryAfter time.Duration
	// message is the provider's own words (the user reads them for a
	// rejected request; the adapters scrub keys from them).
	message string
}

// SafeReason says in a few safe words why the call failed: the row's
// reason with its detail ("the model provider is having trouble — primary
// answered HTTP 503"), or for an unreachable server the detail alone,
// which says the same more precisely ("cannot reach api.example.com:
// connection refused").
func (f Failure) SafeReason() string {
	switch {
	case f.Detail == "":
		return f.Reason
	case f.Kind == KindUnreachable:
		return f.Detail
	}
	return f.Reason + " — " + f.Detail
}

// UserText is the sentence the user reads.
func (f Failure) UserText() string {
	if !strings.Contains(f.User, "%s") {
		return f.User
	}
	arg := f.Detail
	if f.message != "" {
		arg = f.message
	}
	if arg == "" {
		arg = f.Reason
	}
	return fmt.Sprintf(f.User, arg)
}

// ClassifyStop returns the row of a stop reason that needs a word for the
// user, and false for plain ones (stop, tool_calls, other, none).
func ClassifyStop(s StopReason) (Failure, bool) {
	kind, ok := stopKinds[s]
	if !ok {
		return Failure{}, false
	}
	return Failure{Policy: PolicyOf(kind)}, true
}

// Classify says what the outcome err of a model call means (nil is
// KindOK). A cancellation anywhere in err makes it KindCancelled. Otherwise
// err's tree is searched depth first, and the first error that can be
// classified decides: with several routes tried ("every route failed: …"),
// that is the first route's. An APIError decides before whatever it wraps,
// so the provider's own timeout (an APIError wrapping DeadlineExceeded) is
// KindTimeout, a bare DeadlineExceeded KindDeadline.
func Classify(err error) Failure {
	switch {
	case err == nil:
		return Failure{Policy: PolicyOf(KindOK)}
	case errors.Is(err, context.Canceled):
		return Failure{Policy: PolicyOf(KindCancelled)}
	}
	if f, ok := firstClassified(err); ok {
		return f
	}
	return Failure{Policy: PolicyOf(KindUnknown)}
}

// firstClassified walks err's tree depth first (as errors.As does) for the
// first error classify knows.
func firstClassified(err error) (Failure, bool) {
	if f, ok := classifyOne(err); ok {
		return f, true
	}
	//lint:ignore errorlint this is the walk: each error of the tree is looked at itself
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return firstClassified(next)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if f, ok := firstClassified(e); ok {
				return f, true
			}
		}
	}
	return Failure{}, false
}

// classifyOne classifies err itself, not what it wraps.
func classifyOne(err error) (Failure, bool) {
	//lint:ignore errorlint err itself, not what it wraps (firstClassified walks the tree)
	switch e := err.(type) {
	case *APIError:
		return classifyAPI(e), true
	case *AnswerError:
		return Failure{Policy: PolicyOf(KindUnusable)}, true
	case *ContractError:
		return Failure{Policy: PolicyOf(KindBroken)}, true
	case *BudgetError:
		return Failure{Policy: PolicyOf(KindBudget), message: e.Text}, true
	}
	switch {
	//lint:ignore errorlint err itself, as above
	case err == ErrTruncated, err == ErrIncomplete:
		return Failure{Policy: PolicyOf(KindTruncated)}, true
	//lint:ignore errorlint err itself, as above
	case err == context.DeadlineExceeded:
		return Failure{Policy: PolicyOf(KindDeadline)}, true
	case networkError(err):
		if reason, ok := Unreachable(err); ok {
			return Failure{Policy: PolicyOf(KindUnreachable), Detail: reason}, true
		}
	}
	return Failure{}, false
}

// networkError reports whether err is one of the types Unreachable reads,
// so that a plain wrapper around one is not taken for it before what it
// wraps is looked at.
func networkError(err error) bool {
	//lint:ignore errorlint err itself: that is the question asked
	switch err.(type) {
	case *url.Error, *net.OpError, *net.DNSError, syscall.Errno, x509.UnknownAuthorityError,
		x509.HostnameError, x509.CertificateInvalidError, *tls.CertificateVerificationError:
		return true
	}
	return false
}

// classifyAPI classifies a provider's refusal by the kind its adapter
// gave it (or its status's): a failure without an HTTP answer that wraps a
// network error is an unreachable server, with the host and why.
func classifyAPI(e *APIError) Failure {
	f := Failure{RetryAfter: e.RetryAfter}
	if e.Status != 0 {
		name := e.Provider
		if name == "" {
			name = "the provider"
		}
		f.Detail = fmt.Sprintf("%s answered HTTP %d", name, e.Status)
	}
	kind := e.kind()
	f.Policy = PolicyOf(kind)
	switch kind {
	case KindTimeout:
		f.Detail = e.Message
	case KindRejected:
		f.message = e.Message
	case KindUnavailable:
		if reason, ok := Unreachable(e); ok && e.Status == 0 {
			f.Policy, f.Detail = PolicyOf(KindUnreachable), reason
		}
	}
	return f
}
