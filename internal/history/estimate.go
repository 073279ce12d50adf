package history

import (
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Per-item overheads of the chat formats (role markers, call framing), and
// what an image costs, as the providers document them roughly.
const (
	messageOverhead = 4
	callOverhead    = 8
	imageTokens     = 1000
	fileRefTokens   = 20
)

// EstimateText estimates the tokens of s as a BPE tokenizer of the GPT-4o
// family (o200k, cl100k) counts them, in one pass without tables. It mirrors
// the tokenizers' pre-split: an ASCII word with its leading space is about
// one token (long words a few), digits go in groups of three, a run of
// punctuation costs about one token per two bytes, a line break (with the
// indentation after it) one token, a CJK or Hangul character about one, an
// emoji about two. Its error against the real tokenizers, measured on prose,
// code, JSON, command output, Markdown, CJK and emoji, is documented in
// docs/history.md and checked by TestEstimateTextError; the real tokenizer is
// two orders of magnitude slower (docs/history.md#token-estimate), too slow
// for a per-call projection of a long history.
func EstimateText(s string) int { return estimate(s) }

// estimate is EstimateText for a string or bytes, so a tool call's JSON
// arguments are measured where they are, not copied into a string first
// (an allocation per call per estimate).
func estimate[T ~string | ~[]byte](s T) int {
	var tenths int // tokens × 10, so fractional costs add up without floats
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isLetter(c):
			j := i + 1
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			tenths += wordTenths(j - i)
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			tenths += 10 * ((j - i + 2) / 3)
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			j, lines := i, false
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				lines = lines || s[j] == '\n' || s[j] == '\r'
				j++
			}
			// One space before a word belongs to the word's token; longer
			// runs and line breaks are tokens of their own.
			if lines || j-i > 1 {
				tenths += 10
			}
			i = j
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && isPunct(s[j]) {
				j++
			}
			tenths += 4 * (j - i + 1)
			i = j
		default:
			// At most utf8.UTFMax bytes: converting them to a string needs
			// no allocation.
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			tenths += runeTenths(r, size)
			i += size
		}
	}
	return (tenths + 9) / 10
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return c > ' ' && !isLetter(c) && (c < '0' || c > '9')
}

// wordTenths is the cost of an ASCII word of n letters: common words are one
// token, longer ones (identifiers, rare words) split into pieces of about
// five letters.
func wordTenths(n int) int {
	if n <= 8 {
		return 10
	}
	return 10 + 10*(n-8+5)/6
}

// runeTenths is the cost of one non-ASCII rune.
func runeTenths(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 10 // an invalid byte is a token of its own
	case r >= 0x2E80 && r <= 0x9FFF, r >= 0xAC00 && r <= 0xD7AF, r >= 0xF900 && r <= 0xFAFF, r >= 0xFF00 && r <= 0xFFEF:
		return 10 // CJK, kana, Hangul, fullwidth forms
	case r >= 0x1F000, r >= 0x2000 && r <= 0x2BFF:
		return 25 // emoji, pictographs, arrows, dingbats
	case r == 0x200D || r >= 0xFE00 && r <= 0xFE0F:
		return 10 // zero-width joiner, variation selectors
	}
	// Other letters (accented Latin, Cyrillic, Greek, ...) cost about a
	// token per two or three bytes inside a word.
	return 5 * size
}

// Estimate estimates the tokens one message costs in a request, at the
// renderings its parts hold (Content.Live for tool results).
func Estimate(m llm.Message) int {
	n := messageOverhead
	for _, p := range m.Parts {
		n += partTokens(texter{}, p)
	}
	return n
}

func partTokens(c texter, p llm.Part) int {
	switch p.Kind {
	case llm.PartText, llm.PartThinking:
		return c.text(p.Text)
	case llm.PartToolCall:
		n := callOverhead + EstimateText(p.Call.Name)
		if p.Call.ParseError != "" {
			return n + EstimateText(p.Call.RawArgs)
		}
		return n + estimate(p.Call.Arguments)
	case llm.PartToolResult:
		return callOverhead + c.text(p.Result.Content.Live) + imageTokens*len(p.Result.Images)
	case llm.PartImage:
		return imageTokens
	case llm.PartFileRef:
		return fileRefTokens
	}
	return 0
}
