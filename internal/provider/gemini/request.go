package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/render"
)

const (
	// placeholderFirst opens a history that starts with a model turn.
	placeholderFirst = "(earlier conversation omitted)"
	// placeholderLast follows a history that ends with a model turn, which
	// the model would otherwise be asked to continue.
	placeholderLast = "(continue)"
	// missingResult answers a call whose result was never recorded (the turn
	// was interrupted), so the call can still be replayed.
	missingResult = "no result recorded for this tool call (the turn was interrupted before it finished)"
	// emptyResult stands for a tool result without any output.
	emptyResult = "(no output)"
	// skipSignature is the value Google documents for a function call that
	// has no thought signature of its own (made by another model): Gemini 3
	// refuses an unsigned call in the turn being continued, and accepts
	// this one.
	skipSignature = "skip_thought_signature_validator"
)

// Thinking budgets for a ReasoningEffort, in tokens (Gemini 2.5 and 3 both
// take a budget).
var effortBudgets = map[string]int{"low": 1024, "medium": 8192, "high": 24576}

// geminiImageTypes are the image types Gemini accepts inline.
var geminiImageTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/webp": true, "image/heic": true, "image/heif": true,
}

var errNoMessages = errors.New("no messages to send")

// request renders req as the JSON body of a generateContent call.
func (p *Provider) request(req llm.Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errors.New("no model")
	}
	r := renderer{log: p.log}
	contents, system := r.render(req.Messages)
	if len(contents) == 0 {
		return nil, errNoMessages
	}
	out := wireRequest{Contents: contents, GenerationConfig: generationConfig(req)}
	var sys []wirePart
	for _, s := range append([]string{req.System}, system...) {
		if strings.TrimSpace(s) != "" {
			sys = append(sys, textPart(s))
		}
	}
	if len(sys) > 0 {
		out.SystemInstruction = &wireContent{Parts: sys}
	}
	if len(req.Tools) > 0 {
		decls := make([]wireFunctionDecl, 0, len(req.Tools))
		for _, t := range req.Tools {
			decls = append(decls, wireFunctionDecl{Name: t.Name, Description: t.Description, ParametersJSONSchema: schema(t.Parameters)})
		}
		out.Tools = []wireTool{{FunctionDeclarations: decls}}
	}
	if req.ForceTool != "" {
		out.ToolConfig = &wireToolConfig{FunctionCallingConfig: wireFunctionCallingConfig{
			Mode: "ANY", AllowedFunctionNames: []string{req.ForceTool}}}
	}
	return json.Marshal(out)
}

func generationConfig(req llm.Request) *wireGenerationCf {
	g := wireGenerationCf{MaxOutputTokens: req.MaxTokens, Temperature: req.Temperature}
	budget := req.ThinkingBudget
	if budget <= 0 {
		budget = effortBudgets[req.ReasoningEffort]
	}
	if budget > 0 {
		// Thought summaries are asked for only with thinking asked for:
		// they are stored, never shown, and cost nothing to replay.
		g.ThinkingConfig = &wireThinkingConfig{IncludeThoughts: true, ThinkingBudget: &budget}
	}
	if g == (wireGenerationCf{}) {
		return nil
	}
	return &g
}

// schema is the tool's JSON Schema when it is an object schema; a tool
// without parameters sends none.
func schema(raw json.RawMessage) json.RawMessage {
	var probe struct {
		Type string `json:"type"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &probe) != nil || probe.Type != "object" {
		return nil
	}
	return raw
}

func textPart(s string) wirePart { return wirePart{Text: &s} }

// renderer turns the neutral history into Gemini contents.
//
// It walks the history in turns: a model turn (consecutive assistant
// messages merged) and the user segment after it (tool results and user
// messages until the next assistant message). The segment becomes one user
// content: a functionResponse per function call of the model turn, in call
// order — a call without a result gets an error response — then pictures
// tools returned, then the user's own parts. Results that answer no call of
// the turn before them are dropped.
type renderer struct {
	log    *zap.Logger
	out    []wireContent
	system []string
	// current is the index of the first message of the turn being
	// continued (after the last message the user wrote); the function calls
	// from there on are checked for signatures.
	current int

	model      []wirePart
	modelSteps bool // some model content of this segment is in the current turn
	calls      []pendingCall
	results    map[string][]wirePart
	images     []wirePart
	user       []wirePart
}

// pendingCall is a function call of the model turn being rendered.
type pendingCall struct {
	id     string // as stored
	name   string
	wireID string // sent to Gemini, or "" when the call has no Gemini id
}

func (r *renderer) render(history []llm.Message) ([]wireContent, []string) {
	r.current = currentTurn(history)
	for i, m := range history {
		switch m.Role {
		case llm.RoleSystem:
			if t := m.Text(); strings.TrimSpace(t) != "" {
				r.system = append(r.system, t)
			}
		case llm.RoleAssistant:
			if len(r.model) == 0 {
				r.flushUser()
			}
			r.assistant(m, i >= r.current)
		case llm.RoleUser:
			r.flushModel()
			r.user = render.AppendUser(r.user, m.Parts, r.log, textPart, imagePart)
		case llm.RoleTool:
			r.flushModel()
			r.toolResults(m.Parts)
		default:
			r.log.Warn("skipping message with unknown role", zap.String("role", string(m.Role)))
		}
	}
	r.flushModel()
	r.flushUser()
	if len(r.out) == 0 {
		return nil, r.system
	}
	if r.out[0].Role == "model" {
		r.log.Debug("history starts with a model turn; adding a placeholder user turn")
		r.out = append([]wireContent{{Role: "user", Parts: []wirePart{textPart(placeholderFirst)}}}, r.out...)
	}
	if r.out[len(r.out)-1].Role == "model" {
		r.out = append(r.out, wireContent{Role: "user", Parts: []wirePart{textPart(placeholderLast)}})
	}
	return r.out, r.system
}

// currentTurn is the index after the last user message: Gemini validates
// the signatures of the function calls from there on.
func currentTurn(history []llm.Message) int {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == llm.RoleUser {
			return i + 1
		}
	}
	return 0
}

// fromGemini reports whether m's thinking and signatures may be replayed:
// they mean something only to the API that made them
// (docs/history.md#thinking).
func fromGemini(m llm.Message) bool { return m.Meta != nil && m.Meta.API == API }

func (r *renderer) assistant(m llm.Message, current bool) {
	replay := fromGemini(m)
	start := len(r.model)
	for _, part := range m.Parts {
		switch part.Kind {
		case llm.PartText:
			if strings.TrimSpace(part.Text) != "" {
				r.model = append(r.model, textPart(part.Text))
			}
		case llm.PartThinking:
			if !replay || part.Redacted || (part.Text == "" && part.Signature == "") {
				continue
			}
			wp := textPart(part.Text)
			wp.ThoughtSignature = part.Signature
			// A thinking part without text is a signature Gemini sent on
			// an empty or plain text part; it goes back as it came.
			wp.Thought = part.Text != ""
			r.model = append(r.model, wp)
		case llm.PartToolCall:
			if part.Call != nil {
				r.call(*part.Call, part.Signature, replay)
			}
		default:
			r.log.Warn("skipping part not allowed in an assistant message", zap.String("kind", string(part.Kind)))
		}
	}
	if current && len(r.model) > start {
		r.modelSteps = true
	}
}

func (r *renderer) call(c llm.ToolCall, sig string, replay bool) {
	pc := pendingCall{id: c.ID, name: c.Name}
	if replay && !strings.HasPrefix(c.ID, localIDPrefix) {
		pc.wireID = c.ID
	}
	if !replay {
		sig = ""
	}
	r.calls = append(r.calls, pc)
	r.model = append(r.model, wirePart{
		ThoughtSignature: sig,
		FunctionCall:     &wireFunctionCall{ID: pc.wireID, Name: c.Name, Args: toolArgs(c)},
	})
}

// toolArgs is the call's arguments, or {} when they did not parse (the
// call's error result tells the model what was wrong).
func toolArgs(c llm.ToolCall) json.RawMessage {
	var obj map[string]json.RawMessage
	if c.ParseError != "" || len(c.Arguments) == 0 || json.Unmarshal(c.Arguments, &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return c.Arguments
}

func (r *renderer) toolResults(parts []llm.Part) {
	known := func(callID string) bool { _, ok := r.pending(callID); return ok }
	answered := func(callID string) bool { return r.results[callID] != nil }
	for res := range render.ToolResults(parts, r.log, known, answered) {
		pc, _ := r.pending(res.ToolCallID)
		if r.results == nil {
			r.results = make(map[string][]wirePart)
		}
		text := res.Content.Live
		if strings.TrimSpace(text) == "" {
			text = emptyResult
		}
		r.results[res.ToolCallID] = []wirePart{responsePart(pc, text, res.IsError)}
		if len(res.Images) > 0 {
			r.images = append(r.images, textPart(fmt.Sprintf("[images returned by tool %s]", pc.name)))
			for _, img := range res.Images {
				r.images = append(r.images, imagePart(img))
			}
		}
	}
}

func (r *renderer) pending(id string) (pendingCall, bool) {
	for _, pc := range r.calls {
		if pc.id == id {
			return pc, true
		}
	}
	return pendingCall{}, false
}

// responsePart is a functionResponse; its response must be a JSON object:
// {"output": ...} or {"error": ...}, as Google's SDKs write it.
func responsePart(pc pendingCall, text string, isError bool) wirePart {
	key := "output"
	if isError {
		key = "error"
	}
	body, _ := json.Marshal(map[string]string{key: text}) // a map of strings always marshals
	return wirePart{FunctionResponse: &wireFunctionResponse{ID: pc.wireID, Name: pc.name, Response: body}}
}

// flushModel closes a model turn. Where the turn is being continued, its
// first function call carries a signature (Gemini's own, or the documented
// stand-in for a call from another model).
func (r *renderer) flushModel() {
	if len(r.model) == 0 {
		return
	}
	if r.modelSteps {
		for i := range r.model {
			if r.model[i].FunctionCall != nil {
				if r.model[i].ThoughtSignature == "" {
					r.model[i].ThoughtSignature = skipSignature
				}
				break
			}
		}
	}
	r.appendContent("model", r.model)
	r.model, r.modelSteps = nil, false
}

// flushUser closes the user segment after a model turn.
func (r *renderer) flushUser() {
	var parts []wirePart
	for _, pc := range r.calls {
		res := r.results[pc.id]
		if res == nil {
			r.log.Warn("tool call without a result; sending an error response", zap.String("tool_call_id", pc.id))
			res = []wirePart{responsePart(pc, missingResult, true)}
		}
		delete(r.results, pc.id) // a repeated id gets its own error response
		parts = append(parts, res...)
	}
	parts = append(parts, r.images...)
	parts = append(parts, r.user...)
	if len(parts) > 0 {
		r.appendContent("user", parts)
	}
	r.calls, r.results, r.images, r.user = nil, nil, nil, nil
}

// appendContent adds a content, merging it into the previous one of the same
// role (Gemini wants user and model turns to alternate).
func (r *renderer) appendContent(role string, parts []wirePart) {
	if n := len(r.out); n > 0 && r.out[n-1].Role == role {
		r.out[n-1].Parts = append(r.out[n-1].Parts, parts...)
		return
	}
	r.out = append(r.out, wireContent{Role: role, Parts: parts})
}

// imagePart sends inline data; a URL or path (which the adapter cannot
// fetch or read) or an unsupported type becomes a note.
func imagePart(img llm.Image) wirePart {
	switch {
	case len(img.Data) > 0:
		mime := img.MIME
		if mime == "" {
			mime = http.DetectContentType(img.Data)
		}
		if !geminiImageTypes[mime] {
			return textPart(fmt.Sprintf("[image of unsupported type %s omitted]", mime))
		}
		return wirePart{InlineData: &wireBlob{MIMEType: mime, Data: img.Data}}
	case img.URL != "":
		return textPart(fmt.Sprintf("[image at %s not attached]", img.URL))
	default:
		return textPart(fmt.Sprintf("[image at %s not attached]", img.Path))
	}
}
