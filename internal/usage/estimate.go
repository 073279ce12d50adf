package usage

import (
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Estimate is the usage of a call whose server reported none (some
// compatible servers): the request's system prompt, messages and tool
// schemas and the answer, measured with the projection's token estimate
// (history.Estimate, history.EstimateText: a one-pass approximation of the
// GPT-4o family's tokenizers, its error documented in docs/history.md).
// Nothing is taken as read from a cache. Records carrying it are marked
// Estimated.
func Estimate(req llm.Request, answer llm.Message) llm.Usage {
	in := history.EstimateText(req.System)
	for _, m := range req.Messages {
		in += history.Estimate(m)
	}
	for _, t := range req.Tools {
		in += history.EstimateText(t.Name) + history.EstimateText(t.Description) + history.EstimateText(string(t.Parameters))
	}
	return llm.Usage{InputTokens: in, OutputTokens: history.Estimate(answer)}
}

// NeedsEstimate reports whether u is no report at all: a server that
// counts tokens never reports zero input.
func NeedsEstimate(u llm.Usage) bool { return u == (llm.Usage{}) }
