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
)

// EstimateText estimates the tokens of s: about four bytes of English per
// token, and one token per rune for text that is mostly non-ASCII.
func EstimateText(s string) int {
	if s == "" {
		return 0
	}
	runes := utf8.RuneCountInString(s)
	bytesEst := (len(s) + 3) / 4
	if runes*2 < len(s) { // mostly multi-byte text (CJK, emoji): ~1 token per rune
		return max(bytesEst, runes)
	}
	return bytesEst
}

// Estimate estimates the tokens one message costs in a request.
func Estimate(m llm.Message) int {
	n := messageOverhead
	for _, p := range m.Parts {
		switch p.Kind {
		case llm.PartText, llm.PartThinking:
			n += EstimateText(p.Text)
		case llm.PartToolCall:
			n += callOverhead + EstimateText(p.Call.Name) + (len(p.Call.Arguments)+len(p.Call.RawArgs)+3)/4
		case llm.PartToolResult:
			n += callOverhead + EstimateText(p.Result.Content.Live) + imageTokens*len(p.Result.Images)
		case llm.PartImage:
			n += imageTokens
		case llm.PartFileRef:
			n += 20
		}
	}
	return n
}
