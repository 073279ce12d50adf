package anthropic

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestVocabulary: what the Messages API's error types mean in the failure
// table.
func TestVocabulary(t *testing.T) {
	tests := []struct {
		status int
		typ    string
		msg    string
		want   llm.Kind
	}{
		{401, "authentication_error", "invalid x-api-key", llm.KindAuth},
		{403, "permission_error", "", llm.KindAuth},
		{0, "authentication_error", "", llm.KindAuth},
		{400, "billing_error", "", llm.KindQuota},
		{400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", llm.KindTooLong},
		{400, "invalid_request_error", "messages: roles must alternate", llm.KindRejected},
		{404, "not_found_error", "model: claude-x", llm.KindRejected},
		{413, "request_too_large", "", llm.KindRejected},
		{0, "invalid_request_error", "", llm.KindRejected},
		{429, "rate_limit_error", "", llm.KindRateLimit},
		{0, "rate_limit_error", "", llm.KindRateLimit},
		{529, "overloaded_error", "Overloaded", llm.KindUnavailable},
		{0, "overloaded_error", "", llm.KindUnavailable},
		{500, "api_error", "", llm.KindUnavailable},
	}
	for _, tt := range tests {
		if got := vocabulary.Kind(tt.status, tt.typ, tt.msg); got != tt.want {
			t.Errorf("Kind(%d, %q, %q) = %s, want %s", tt.status, tt.typ, tt.msg, got, tt.want)
		}
	}
}
