package httpcall

import (
	"strings"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Vocabulary is what one protocol's error bodies say, for Kind: the kind of
// each error type or code its servers send, and the phrases with which they
// refuse a request too long for the model's context window when no code
// says so. Each adapter declares its own; llm knows no vendor's words.
type Vocabulary struct {
	Types   map[string]llm.Kind
	TooLong []string
}

// Kind reads a refusal into the failure table (llm.Policies) by the
// protocol's vocabulary, in this order: a type that names a refused key or
// a spent quota decides whatever the status (a 429 that says the quota is
// spent is no rate limit); then 401 and 403 are a refused key; a type that
// names a request too long decides; then the status (llm.StatusKind),
// unless the type names a rate limit or trouble on the provider's side, or
// the failure came without a status (an error event in a stream), when the
// type's kind decides. A refused request (400, 413 or in a stream) whose
// message holds one of the TooLong phrases is a request too long.
func (v Vocabulary) Kind(status int, typ, msg string) llm.Kind {
	k, known := v.Types[typ]
	switch {
	case known && (k == llm.KindAuth || k == llm.KindQuota):
		return k
	case status == 401 || status == 403:
		return llm.KindAuth
	case known && k == llm.KindTooLong:
		return k
	}
	kind := llm.StatusKind(status)
	if known && (status == 0 || k == llm.KindRateLimit || k == llm.KindUnavailable) {
		kind = k
	}
	if kind == llm.KindRejected && (status == 0 || status == 400 || status == 413) && v.tooLong(msg) {
		return llm.KindTooLong
	}
	return kind
}

func (v Vocabulary) tooLong(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range v.TooLong {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
