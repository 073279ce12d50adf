package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/render"
)

const (
	// defaultMaxTokens is sent when the request leaves MaxTokens at 0:
	// Anthropic requires max_tokens, and every current model allows this.
	defaultMaxTokens = 8192
	// minThinkingBudget is the smallest budget_tokens Anthropic accepts.
	minThinkingBudget = 1024

	// placeholderFirst opens a history that starts with an assistant message
	// (Anthropic requires a user message first).
	placeholderFirst = "(earlier conversation omitted)"
	// placeholderLast follows a history that ends with an assistant message:
	// sent as is, Anthropic would treat it as a prefill to continue.
	placeholderLast = "(continue)"
	// missingResult answers a tool call whose result was never recorded
	// (e.g. the turn was interrupted), so the call can still be replayed.
	missingResult = "error: no result recorded for this tool call (the turn was interrupted before it finished)"
	// emptyResult stands for a tool result without any output.
	emptyResult = "(no output)"
)

var errNoMessages = errors.New("no messages to send")

// Roles of wireMessage.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// request converts a provider-neutral request into the body of a streamed
// Messages call.
func (p *Provider) request(req llm.Request) ([]byte, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	// json.Marshal escapes <, > and & in strings as the SDK did (the API
	// reads the same text either way); tool schemas and arguments are
	// json.RawMessage, only compacted.
	return json.Marshal(params)
}

// params converts a provider-neutral request into Messages API parameters.
func (p *Provider) params(req llm.Request) (*wireRequest, error) {
	if req.Model == "" {
		return nil, errors.New("no model")
	}
	r := renderer{log: p.log}
	msgs, systemTexts := r.render(req.Messages)
	if len(msgs) == 0 {
		return nil, errNoMessages
	}
	out := &wireRequest{
		Model:    req.Model,
		Messages: msgs,
		System:   systemBlocks(req.System, systemTexts),
		Tools:    tools(req.Tools),
		Stream:   true,
	}
	markLastBlockCached(msgs)

	budget := p.thinkingBudget(req, msgs)
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	if budget > 0 {
		if maxTokens <= budget {
			// max_tokens counts thinking too; leave room for the answer.
			maxTokens = budget + defaultMaxTokens
		}
		out.Thinking = &wireThinking{BudgetTokens: budget, Type: "enabled"}
	} else if req.Temperature != nil {
		out.Temperature = req.Temperature
	}
	out.MaxTokens = maxTokens
	if req.ForceTool != "" {
		out.ToolChoice = &wireToolChoice{Name: req.ForceTool, Type: "tool"}
	}
	return out, nil
}

// thinkingBudget decides whether extended thinking can be on for this call.
// Anthropic refuses it with a forced tool, and — while a tool loop is in
// progress — when the assistant turn being continued was not started with a
// thinking block (e.g. it came from another provider); thinking is then left
// off for this call rather than failing it.
func (p *Provider) thinkingBudget(req llm.Request, msgs []wireMessage) int {
	budget := req.ThinkingBudget
	if budget <= 0 {
		return 0
	}
	if req.ForceTool != "" {
		p.log.Debug("thinking off for a forced tool call", zap.String("tool", req.ForceTool))
		return 0
	}
	if n := len(msgs); n >= 2 && msgs[n-1].Content[0].Type == blockToolResult {
		first := msgs[n-2].Content[0].Type
		if first != blockThinking && first != blockRedactedThinking {
			p.log.Debug("thinking off: the tool loop being continued has no Anthropic thinking block")
			return 0
		}
	}
	return max(budget, minThinkingBudget)
}

func systemBlocks(system string, more []string) []wireBlock {
	var out []wireBlock
	for _, s := range append([]string{system}, more...) {
		if strings.TrimSpace(s) != "" {
			out = append(out, textBlock(s))
		}
	}
	if n := len(out); n > 0 {
		// One breakpoint after the system prompt caches tools and system
		// together: the prompt is byte-identical between turns
		// (README.md#the-workspace).
		out[n-1].CacheControl = ephemeral()
	}
	return out
}

// markLastBlockCached puts the second cache breakpoint on the last block of
// the conversation, so the next call of a tool loop (or the next turn) reads
// the whole history before it from the cache.
func markLastBlockCached(msgs []wireMessage) {
	last := msgs[len(msgs)-1]
	if last.Role != roleUser {
		return
	}
	b := &last.Content[len(last.Content)-1]
	switch b.Type {
	case blockText, blockToolResult, blockImage:
		b.CacheControl = ephemeral()
	}
}

func tools(specs []llm.ToolSpec) []wireTool {
	var out []wireTool
	for _, s := range specs {
		out = append(out, wireTool{Name: s.Name, Description: s.Description, InputSchema: inputSchema(s.Parameters)})
	}
	return out
}

// inputSchema sends the tool's JSON schema verbatim when it is an object
// schema, and an empty object schema otherwise (Anthropic requires one).
func inputSchema(raw json.RawMessage) json.RawMessage {
	var probe struct {
		Type string `json:"type"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &probe) != nil || probe.Type != "object" {
		raw = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return raw
}

// renderer turns the neutral history into alternating Messages API messages.
//
// It walks the history in turns: an assistant turn (consecutive assistant
// messages merged) and the user segment after it (tool results and user
// messages until the next assistant message). The segment becomes one user
// message: the turn's tool results first, in call order — a call without a
// result gets a synthetic error result — then the user's own blocks. Results
// that answer no call of the turn before them are dropped.
type renderer struct {
	log *zap.Logger
	out []wireMessage
	// system collects the text of system messages found in the history.
	system []string

	asst []wireBlock
	// calls are the wire ids of the current turn's tool calls, in order;
	// wire maps a call id as stored to its wire id for this turn.
	calls   []string
	wire    map[string]string
	results map[string]wireBlock
	user    []wireBlock
	// used holds every tool_use id already sent, which must stay unique.
	used map[string]bool
}

func (r *renderer) render(history []llm.Message) ([]wireMessage, []string) {
	r.used = make(map[string]bool)
	for _, m := range history {
		switch m.Role {
		case llm.RoleSystem:
			if t := m.Text(); strings.TrimSpace(t) != "" {
				r.system = append(r.system, t)
			}
		case llm.RoleAssistant:
			if len(r.asst) == 0 {
				// A new assistant turn closes the user segment before it;
				// consecutive assistant messages merge into one turn.
				r.flushUser()
			}
			r.assistant(m)
		case llm.RoleUser:
			r.flushAssistant()
			r.user = render.AppendUser(r.user, m.Parts, r.log, textBlock, imageBlock)
		case llm.RoleTool:
			r.flushAssistant()
			r.toolResults(m.Parts)
		default:
			r.log.Warn("skipping message with unknown role", zap.String("role", string(m.Role)))
		}
	}
	r.flushAssistant()
	r.flushUser()
	if len(r.out) == 0 {
		return nil, r.system
	}
	if r.out[0].Role == roleAssistant {
		r.log.Debug("history starts with an assistant message; adding a placeholder user message")
		r.out = append([]wireMessage{{Role: roleUser, Content: []wireBlock{textBlock(placeholderFirst)}}}, r.out...)
	}
	if r.out[len(r.out)-1].Role == roleAssistant {
		r.out = append(r.out, wireMessage{Role: roleUser, Content: []wireBlock{textBlock(placeholderLast)}})
	}
	return r.out, r.system
}

// fromAnthropic reports whether m's thinking may be replayed: signatures are
// only meaningful to the API that made them (docs/history.md#thinking).
func fromAnthropic(m llm.Message) bool { return m.Meta != nil && m.Meta.API == API }

func (r *renderer) assistant(m llm.Message) {
	replay := fromAnthropic(m)
	for _, part := range m.Parts {
		switch part.Kind {
		case llm.PartText:
			if strings.TrimSpace(part.Text) != "" {
				r.asst = append(r.asst, textBlock(part.Text))
			}
		case llm.PartThinking:
			switch {
			case !replay:
			case part.Redacted && part.Text != "":
				r.asst = append(r.asst, wireBlock{Data: part.Text, Type: blockRedactedThinking})
			case part.Signature != "":
				text := part.Text
				r.asst = append(r.asst, wireBlock{Signature: part.Signature, Thinking: &text, Type: blockThinking})
			}
		case llm.PartToolCall:
			if part.Call != nil {
				r.toolUse(*part.Call)
			}
		default:
			r.log.Warn("skipping part not allowed in an assistant message", zap.String("kind", string(part.Kind)))
		}
	}
}

func (r *renderer) toolUse(c llm.ToolCall) {
	id := r.newWireID(c.ID)
	if r.wire == nil {
		r.wire = make(map[string]string)
	}
	if _, dup := r.wire[c.ID]; !dup {
		r.wire[c.ID] = id
	}
	r.calls = append(r.calls, id)
	r.asst = append(r.asst, wireBlock{ID: id, Input: toolInput(c), Name: c.Name, Type: blockToolUse})
}

// toolInput is the call's arguments, or {} when they did not parse (the
// call's error result tells the model what was wrong).
func toolInput(c llm.ToolCall) json.RawMessage {
	args := c.Arguments
	if c.ParseError != "" || len(args) == 0 {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return args
}

// newWireID makes a call id acceptable to Anthropic (letters, digits, _ and
// -) and unique in the request: other providers' ids may use other
// characters or repeat across turns.
func (r *renderer) newWireID(id string) string {
	base := sanitizeID(id)
	w := base
	for n := 2; r.used[w]; n++ {
		w = base + "_" + strconv.Itoa(n)
	}
	r.used[w] = true
	return w
}

func sanitizeID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "call"
	}
	return string(b)
}

func (r *renderer) toolResults(parts []llm.Part) {
	known := func(callID string) bool { _, ok := r.wire[callID]; return ok }
	answered := func(callID string) bool { return r.results[r.wire[callID]].Type == blockToolResult }
	for res := range render.ToolResults(parts, r.log, known, answered) {
		id := r.wire[res.ToolCallID]
		if r.results == nil {
			r.results = make(map[string]wireBlock)
		}
		r.results[id] = toolResultBlock(id, *res)
	}
}

// toolResultBlock holds the result's text, then its images (or the notes
// standing for them).
func toolResultBlock(id string, res llm.ToolResult) wireBlock {
	tr := wireBlock{ToolUseID: id, IsError: res.IsError, Type: blockToolResult}
	text := res.Content.Live
	if strings.TrimSpace(text) == "" && len(res.Images) == 0 {
		text = emptyResult
	}
	if strings.TrimSpace(text) != "" {
		tr.Content = append(tr.Content, textBlock(text))
	}
	for _, img := range res.Images {
		tr.Content = append(tr.Content, imageBlock(img))
	}
	return tr
}

func textBlock(text string) wireBlock { return wireBlock{Text: text, Type: blockText} }

func (r *renderer) flushAssistant() {
	if len(r.asst) > 0 {
		r.appendMessage(roleAssistant, r.asst)
		r.asst = nil
	}
}

// flushUser closes the user segment after an assistant turn.
func (r *renderer) flushUser() {
	var blocks []wireBlock
	for _, id := range r.calls {
		res, ok := r.results[id]
		if !ok {
			r.log.Warn("tool call without a result; sending a synthetic error result", zap.String("tool_call_id", id))
			res = wireBlock{ToolUseID: id, IsError: true, Content: []wireBlock{textBlock(missingResult)}, Type: blockToolResult}
		}
		blocks = append(blocks, res)
	}
	blocks = append(blocks, r.user...)
	if len(blocks) > 0 {
		r.appendMessage(roleUser, blocks)
	}
	r.calls, r.wire, r.results, r.user = nil, nil, nil, nil
}

// appendMessage adds a message, merging it into the previous one of the same
// role (Anthropic wants roles to alternate).
func (r *renderer) appendMessage(role string, blocks []wireBlock) {
	if n := len(r.out); n > 0 && r.out[n-1].Role == role {
		r.out[n-1].Content = append(r.out[n-1].Content, blocks...)
		return
	}
	r.out = append(r.out, wireMessage{Role: role, Content: blocks})
}

// anthropicImageTypes are the image types the Messages API accepts.
var anthropicImageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// imageBlock sends inline data as base64 and a URL as a URL source; a path
// (which the adapter cannot read) or an unsupported type becomes a note.
func imageBlock(img llm.Image) wireBlock {
	switch {
	case len(img.Data) > 0:
		mime := img.MIME
		if mime == "" {
			mime = http.DetectContentType(img.Data)
		}
		if !anthropicImageTypes[mime] {
			return textBlock(fmt.Sprintf("[image of unsupported type %s omitted]", mime))
		}
		src := &wireImageSource{Data: base64.StdEncoding.EncodeToString(img.Data), MediaType: mime, Type: "base64"}
		return wireBlock{Source: src, Type: blockImage}
	case img.URL != "":
		return wireBlock{Source: &wireImageSource{URL: img.URL, Type: "url"}, Type: blockImage}
	default:
		return textBlock(fmt.Sprintf("[image at %s not attached]", img.Path))
	}
}
