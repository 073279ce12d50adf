package metrics

import (
	"context"
	"errors"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Outcomes of a model call: the outcome label of nanobot_llm_calls_total.
const (
	LLMOK        = "ok"
	LLMCancelled = "cancelled" // the turn was stopped or the daemon is shutting down
	// LLMRateLimited: 429 after the retries and fallbacks were used up.
	LLMRateLimited = "rate_limited"
	// LLMAuth: the key was refused (401/403).
	LLMAuth = "auth"
	// LLMQuota: the account's quota or billing is exhausted.
	LLMQuota = "quota"
	// LLMUnavailable: the provider could not be reached or failed on its
	// side (5xx, overloaded, timeout, connection error, truncated stream,
	// circuit open).
	LLMUnavailable = "unavailable"
	// LLMRejected: the provider answered and refused the request (4xx).
	LLMRejected = "rejected"
	// LLMError: anything else (an unknown route, a broken stream).
	LLMError = "error"
)

// LLMOutcome classifies the error of a model call. With several routes
// tried (fallbacks), the first classified provider error decides.
func LLMOutcome(err error) string {
	var api *llm.APIError
	switch {
	case err == nil:
		return LLMOK
	case errors.Is(err, context.Canceled):
		return LLMCancelled
	case errors.As(err, &api):
		switch {
		case api.Auth():
			return LLMAuth
		case api.QuotaExceeded():
			return LLMQuota
		case api.Status == 429:
			return LLMRateLimited
		case api.Retryable():
			return LLMUnavailable
		}
		return LLMRejected
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, llm.ErrTruncated):
		return LLMUnavailable
	}
	return LLMError
}

// Unreachable reports whether outcome means the provider cannot serve
// requests right now (as opposed to refusing one request, or the caller
// giving up), which is what readiness cares about.
func Unreachable(outcome string) bool {
	switch outcome {
	case LLMAuth, LLMQuota, LLMUnavailable:
		return true
	}
	return false
}
