package httpcall

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestVocabularyKind holds the order Kind reads a refusal in, with a
// vocabulary of made-up codes (each adapter tests its own words).
func TestVocabularyKind(t *testing.T) {
	v := Vocabulary{
		Types: map[string]llm.Kind{
			"key": llm.KindAuth, "spent": llm.KindQuota, "long": llm.KindTooLong,
			"slow": llm.KindRateLimit, "busy": llm.KindUnavailable, "bad": llm.KindRejected,
		},
		TooLong: []string{"too many tokens"},
	}
	tests := []struct {
		name   string
		status int
		typ    string
		msg    string
		want   llm.Kind
	}{
		{"a bad key in a 400", 400, "key", "", llm.KindAuth},
		{"a spent quota in a 429 is no rate limit", 429, "spent", "", llm.KindQuota},
		{"401 whatever the type", 401, "bad", "", llm.KindAuth},
		{"403", 403, "", "", llm.KindAuth},
		{"too long by its code", 400, "long", "", llm.KindTooLong},
		{"too long in words", 400, "bad", "Too many tokens: 9000 > 8000", llm.KindTooLong},
		{"too long in words, 413", 413, "", "too many tokens", llm.KindTooLong},
		{"too long in words inside a stream", 0, "bad", "too many tokens", llm.KindTooLong},
		{"the words do not make a 503 too long", 503, "", "too many tokens", llm.KindUnavailable},
		{"nor a 422", 422, "", "too many tokens", llm.KindRejected},
		{"429", 429, "", "", llm.KindRateLimit},
		{"a rate limit by its type in a 400", 400, "slow", "", llm.KindRateLimit},
		{"trouble by its type in a 400", 400, "busy", "", llm.KindUnavailable},
		{"a rejected type does not make a 503 a refusal", 503, "bad", "", llm.KindUnavailable},
		{"a rejected type inside a stream", 0, "bad", "", llm.KindRejected},
		{"an unknown type inside a stream", 0, "what", "", llm.KindUnavailable},
		{"an unknown type in a 404", 404, "what", "", llm.KindRejected},
		{"409", 409, "", "", llm.KindUnavailable},
	}
	for _, tt := range tests {
		if got := v.Kind(tt.status, tt.typ, tt.msg); got != tt.want {
			t.Errorf("%s: Kind(%d, %q, %q) = %s, want %s", tt.name, tt.status, tt.typ, tt.msg, got, tt.want)
		}
	}
}
