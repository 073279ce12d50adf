package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"path"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// reasoningFamilies are OpenAI model families that take max_completion_tokens
// instead of max_tokens, reject any temperature but the default, and accept
// reasoning_effort. Matched on the model id after any vendor prefix
// ("openai/o3-mini" on OpenRouter).
var reasoningFamilies = []string{"o1", "o3", "o4", "gpt-5"}

// isReasoningModel reports whether model belongs to reasoningFamilies: the
// family name alone or followed by '-' or '.' ("o3-mini", "gpt-5.1").
func isReasoningModel(model string) bool {
	m := strings.ToLower(model[strings.LastIndexByte(model, '/')+1:])
	for _, f := range reasoningFamilies {
		if rest, ok := strings.CutPrefix(m, f); ok && (rest == "" || rest[0] == '-' || rest[0] == '.') {
			return true
		}
	}
	return false
}

// emptyParameters is sent for a tool without a schema; OpenAI requires an object.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// chatRequest translates the neutral request into Chat Completions.
func (p *Provider) chatRequest(req llm.Request) goopenai.ChatCompletionRequest {
	out := goopenai.ChatCompletionRequest{
		Model:         req.Model,
		Messages:      p.messages(req),
		Stream:        true,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	}
	if isReasoningModel(req.Model) {
		out.MaxCompletionTokens = req.MaxTokens
		out.ReasoningEffort = req.ReasoningEffort
	} else {
		//lint:ignore SA1019 the OpenAI-compatible servers (vLLM, Ollama, OpenRouter's others) read max_tokens
		out.MaxTokens = req.MaxTokens
		if t := req.Temperature; t != nil {
			out.Temperature = float32(*t)
			if out.Temperature == 0 {
				// go-openai omits a zero temperature (omitempty on a float),
				// which would silently mean the server's default of 1.
				out.Temperature = math.SmallestNonzeroFloat32
			}
		}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = emptyParameters
		}
		out.Tools = append(out.Tools, goopenai.Tool{
			Type:     goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	if req.ForceTool != "" {
		out.ToolChoice = goopenai.ToolChoice{Type: goopenai.ToolTypeFunction, Function: goopenai.ToolFunction{Name: req.ForceTool}}
	}
	return out
}

// messages renders the history. Thinking is never sent (OpenAI-compatible
// servers such as DeepSeek reject reasoning_content in requests). Tool
// results are placed right after the assistant message that called them,
// one tool message per call in call order; see assistant.
func (p *Provider) messages(req llm.Request) []goopenai.ChatCompletionMessage {
	out := p.enc.msgSlice(len(req.Messages) + 1)
	if req.System != "" {
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.System})
	}
	for i, step := range steps(req.Messages) {
		m := step[0]
		switch m.Role {
		case llm.RoleSystem:
			if t := joinText(m.Parts); t != "" {
				out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: t})
			}
		case llm.RoleUser:
			if u, ok := userMessage(m.Parts); ok {
				out = append(out, u)
			} else {
				p.log.Warn("dropping empty user message", zap.String("provider", p.name), zap.Int("index", i))
			}
		case llm.RoleAssistant:
			out = p.assistant(out, m, step[1:])
		case llm.RoleTool:
			p.log.Warn("dropping tool results without a preceding tool call", zap.String("provider", p.name), zap.Int("index", i))
		default:
			p.log.Warn("dropping message with unknown role", zap.String("provider", p.name), zap.String("role", string(m.Role)))
		}
	}
	return out
}

// steps yields the history's messages with their index, each assistant
// message together with the tool messages right after it (its results),
// which are not yielded again: both APIs want a call's result right after
// the call.
func steps(msgs []llm.Message) iter.Seq2[int, []llm.Message] {
	return func(yield func(int, []llm.Message) bool) {
		for i := 0; i < len(msgs); {
			j := i + 1
			if msgs[i].Role == llm.RoleAssistant {
				for j < len(msgs) && msgs[j].Role == llm.RoleTool {
					j++
				}
			}
			if !yield(i, msgs[i:j]) {
				return
			}
			i = j
		}
	}
}

// noResult is the content sent for a call the history has no result for, so
// the request stays valid and the model learns the call did not complete.
const noResult = "Error: no result recorded for this tool call."

// assistant appends an assistant message and the results of its calls from
// the tool messages that follow it. A missing result becomes an error result;
// a result for a call that is not there is dropped, because OpenAI rejects a
// tool message without its call.
func (p *Provider) assistant(out []goopenai.ChatCompletionMessage, m llm.Message, tools []llm.Message) []goopenai.ChatCompletionMessage {
	msg := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: joinText(m.Parts)}
	calls := m.ToolCalls()
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, goopenai.ToolCall{
			ID:       c.ID,
			Type:     goopenai.ToolTypeFunction,
			Function: goopenai.FunctionCall{Name: c.Name, Arguments: callArguments(c)},
		})
	}
	results := make(map[string]llm.ToolResult)
	var order []string
	for _, t := range tools {
		for _, r := range t.ToolResults() {
			if _, dup := results[r.ToolCallID]; !dup {
				results[r.ToolCallID] = r
				order = append(order, r.ToolCallID)
			}
		}
	}
	if msg.Content == "" && len(msg.ToolCalls) == 0 {
		// Thinking only: OpenAI rejects an assistant message with neither
		// content nor tool_calls.
		if len(results) > 0 {
			p.log.Warn("dropping tool results without a preceding tool call", zap.String("provider", p.name), zap.Int("results", len(results)))
		}
		return out
	}
	out = append(out, msg)

	var images []goopenai.ChatMessagePart
	for _, c := range calls {
		r, ok := results[c.ID]
		if !ok {
			p.log.Info("tool call without a result; sending an error result", zap.String("provider", p.name), zap.String("call", c.ID), zap.String("tool", c.Name))
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: c.ID, Content: noResult})
			continue
		}
		delete(results, c.ID)
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: c.ID, Content: resultText(r)})
		if len(r.Images) > 0 {
			images = append(images, textPart(fmt.Sprintf("[images returned by tool %s (call %s)]", c.Name, c.ID)))
			for _, img := range r.Images {
				images = append(images, imagePart(img))
			}
		}
	}
	for _, id := range order {
		if _, orphan := results[id]; orphan {
			p.log.Warn("dropping tool result whose call is absent", zap.String("provider", p.name), zap.String("call", id))
		}
	}
	if len(images) > 0 {
		// Tool messages carry text only, so pictures follow as a user message.
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, MultiContent: images})
	}
	return out
}

// callArguments is the call's argument object; {} when what the model sent
// did not parse (docs/reliability.md#every-turn-ends-with-something-to-read).
// Servers that parse arguments (vLLM, several gateways) refuse the raw text
// with a 400 on every later request of the chat; the model learns its mistake
// from the call's error result, which quotes the parse error, as with the
// Anthropic and Gemini adapters.
func callArguments(c llm.ToolCall) string {
	if c.ParseError != "" {
		return "{}"
	}
	if len(c.Arguments) == 0 {
		return "{}"
	}
	return string(c.Arguments)
}

// resultText renders a tool result. OpenAI has no error flag on tool
// messages, so an error is marked in the text unless it already says so.
func resultText(r llm.ToolResult) string {
	s := r.Content.Live
	if s == "" {
		s = "(no output)"
	}
	if r.IsError && !hasPrefixFold(s, "error") {
		s = "Error: " + s
	}
	return s
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// userMessage renders a user message: plain content when it is only text
// (every compatible server accepts that), parts when it carries images.
func userMessage(parts []llm.Part) (goopenai.ChatCompletionMessage, bool) {
	msg := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser}
	hasImage := false
	for _, pt := range parts {
		if pt.Kind == llm.PartImage && pt.Image != nil {
			hasImage = true
		}
	}
	if !hasImage {
		msg.Content = joinText(parts)
		return msg, msg.Content != ""
	}
	for _, pt := range parts {
		switch {
		case pt.Kind == llm.PartText && pt.Text != "":
			msg.MultiContent = append(msg.MultiContent, textPart(pt.Text))
		case pt.Kind == llm.PartImage && pt.Image != nil:
			msg.MultiContent = append(msg.MultiContent, imagePart(*pt.Image))
		case pt.Kind == llm.PartFileRef && pt.File != nil:
			msg.MultiContent = append(msg.MultiContent, textPart(fileNote(*pt.File)))
		}
	}
	return msg, true
}

// joinText joins the text parts (and file notes) of a message with newlines;
// separate parts are separate inputs and must not run together.
func joinText(parts []llm.Part) string {
	if len(parts) == 1 && parts[0].Kind == llm.PartText {
		// Nearly every message: no copy, and the string stays the one the
		// session holds, which the encoder's cache compares by pointer first.
		return parts[0].Text
	}
	var b strings.Builder
	for _, pt := range parts {
		var s string
		switch {
		case pt.Kind == llm.PartText:
			s = pt.Text
		case pt.Kind == llm.PartFileRef && pt.File != nil:
			s = fileNote(*pt.File)
		}
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}

func textPart(s string) goopenai.ChatMessagePart {
	return goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeText, Text: s}
}

// imagePart sends an image by data URL or URL. An image known only by path
// should have been loaded by the caller; if not, the model gets a note.
func imagePart(img llm.Image) goopenai.ChatMessagePart {
	var url string
	switch {
	case len(img.Data) > 0:
		mime := img.MIME
		if mime == "" {
			mime = "image/png"
		}
		url = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
	case img.URL != "":
		url = img.URL
	default:
		return textPart(fmt.Sprintf("[image not sent: %s was not loaded]", img.Path))
	}
	return goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: url}}
}

// fileNote describes a file the user sent: `[file: name (mime, size) at path]`.
func fileNote(f llm.FileRef) string {
	name := f.Name
	if name == "" {
		name = path.Base(f.Path)
	}
	var info []string
	if f.MIME != "" {
		info = append(info, f.MIME)
	}
	if f.Size > 0 {
		info = append(info, bytesize.Format(f.Size))
	}
	if len(info) == 0 {
		return fmt.Sprintf("[file: %s at %s]", name, f.Path)
	}
	return fmt.Sprintf("[file: %s (%s) at %s]", name, strings.Join(info, ", "), f.Path)
}
