// Package render holds the steps of turning a provider-neutral history into
// a request that read the history the same way whatever the wire format:
// which parts of a user message are sent, how a file reference reads to the
// model, and which tool results may answer a call. The anthropic and gemini
// adapters build their own blocks from what it hands them; the openai
// adapter, whose user content and file notes differ, keeps its own.
package render

import (
	"iter"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// AppendUser appends the parts of a user message to dst as blocks of one
// wire format: text that is not blank, images, and a file reference as a
// text note (FileNote). Any other part cannot stand in a user message; it is
// logged and skipped.
func AppendUser[B any](dst []B, parts []llm.Part, log *zap.Logger, text func(string) B, image func(llm.Image) B) []B {
	for _, part := range parts {
		switch part.Kind {
		case llm.PartText:
			if strings.TrimSpace(part.Text) != "" {
				dst = append(dst, text(part.Text))
			}
		case llm.PartImage:
			if part.Image != nil {
				dst = append(dst, image(*part.Image))
			}
		case llm.PartFileRef:
			if part.File != nil {
				dst = append(dst, text(FileNote(*part.File)))
			}
		default:
			log.Warn("skipping part not allowed in a user message", zap.String("kind", string(part.Kind)))
		}
	}
	return dst
}

// ToolResults yields the results of a tool message that may be sent: each
// answers a call of the turn (known reports that) which has no result yet
// (answered reports one). Anything else is logged and skipped: a tool
// message holds only results, a result without its call would be refused,
// and a call takes one result.
func ToolResults(parts []llm.Part, log *zap.Logger, known, answered func(callID string) bool) iter.Seq[*llm.ToolResult] {
	return func(yield func(*llm.ToolResult) bool) {
		for _, part := range parts {
			if part.Kind != llm.PartToolResult || part.Result == nil {
				log.Warn("skipping part not allowed in a tool message", zap.String("kind", string(part.Kind)))
				continue
			}
			res := part.Result
			switch {
			case !known(res.ToolCallID):
				log.Warn("dropping tool result without its call", zap.String("tool_call_id", res.ToolCallID))
				continue
			case answered(res.ToolCallID):
				log.Warn("dropping second tool result for one call", zap.String("tool_call_id", res.ToolCallID))
				continue
			}
			if !yield(res) {
				return
			}
		}
	}
}

// FileNote is the text standing for a file the user sent:
// `[file: path (name n, mime, size bytes)]`, the details that are known.
func FileNote(f llm.FileRef) string {
	var details []string
	if f.Name != "" && f.Name != f.Path {
		details = append(details, "name "+f.Name)
	}
	if f.MIME != "" {
		details = append(details, f.MIME)
	}
	if f.Size > 0 {
		details = append(details, strconv.FormatInt(f.Size, 10)+" bytes")
	}
	if len(details) == 0 {
		return "[file: " + f.Path + "]"
	}
	return "[file: " + f.Path + " (" + strings.Join(details, ", ") + ")]"
}
