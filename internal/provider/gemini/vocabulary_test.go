package gemini

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestVocabulary: what Google's canonical status names mean in the
// failure table.
func TestVocabulary(t *testing.T) {
	tests := []struct {
		status int
		typ    string
		msg    string
		want   llm.Kind
	}{
		{400, "API_KEY_INVALID", "API key not valid", llm.KindAuth},
		{401, "UNAUTHENTICATED", "", llm.KindAuth},
		{403, "PERMISSION_DENIED", "", llm.KindAuth},
		{0, "PERMISSION_DENIED", "", llm.KindAuth},
		{429, "RESOURCE_EXHAUSTED", "", llm.KindRateLimit},
		{0, "RESOURCE_EXHAUSTED", "", llm.KindRateLimit},
		{400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", llm.KindTooLong},
		{400, "INVALID_ARGUMENT", "Invalid JSON payload", llm.KindRejected},
		{0, "FAILED_PRECONDITION", "", llm.KindRejected},
		{404, "NOT_FOUND", "", llm.KindRejected},
		{400, "PROMPT_BLOCKED", "", llm.KindRejected},
		{503, "UNAVAILABLE", "", llm.KindUnavailable},
		{0, "UNAVAILABLE", "", llm.KindUnavailable},
		{500, "INTERNAL", "", llm.KindUnavailable},
	}
	for _, tt := range tests {
		if got := vocabulary.Kind(tt.status, tt.typ, tt.msg); got != tt.want {
			t.Errorf("Kind(%d, %q, %q) = %s, want %s", tt.status, tt.typ, tt.msg, got, tt.want)
		}
	}
}
