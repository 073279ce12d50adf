package openai

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestVocabulary: what OpenAI's error types and codes, and those
// compatible servers send, mean in the failure table.
func TestVocabulary(t *testing.T) {
	tests := []struct {
		status int
		typ    string
		msg    string
		want   llm.Kind
	}{
		{401, "invalid_request_error", "Incorrect API key provided", llm.KindAuth},
		{0, "invalid_api_key", "", llm.KindAuth},
		{429, "insufficient_quota", "You exceeded your current quota", llm.KindQuota},
		{429, "requests", "Rate limit reached", llm.KindRateLimit},
		{400, "context_length_exceeded", "", llm.KindTooLong},
		{400, "invalid_request_error", "This model's maximum context length is 128000 tokens.", llm.KindTooLong},
		{400, "", "prompt is too long: 210000 tokens > 200000 maximum", llm.KindTooLong},
		{400, "invalid_request_error", "tools[0].name is invalid", llm.KindRejected},
		{0, "invalid_request_error", "bad", llm.KindRejected},
		{0, "server_error", "boom", llm.KindUnavailable},
		{0, "rate_limit_error", "", llm.KindRateLimit},
		{529, "overloaded_error", "", llm.KindUnavailable},
		{503, "", "", llm.KindUnavailable},
	}
	for _, tt := range tests {
		if got := vocabulary.Kind(tt.status, tt.typ, tt.msg); got != tt.want {
			t.Errorf("Kind(%d, %q, %q) = %s, want %s", tt.status, tt.typ, tt.msg, got, tt.want)
		}
	}
}
