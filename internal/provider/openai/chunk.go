package openai

import (
	"encoding/json"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// wireChunk is one streamed chat.completion.chunk. It is decoded here rather
// than with go-openai's type because compatible servers add fields that type
// lacks: OpenRouter's delta.reasoning, Groq's x_groq.usage, DeepSeek's
// prompt_cache_hit_tokens and an "error" member inside an ordinary chunk.
type wireChunk struct {
	Choices []wireChoice                `json:"choices"`
	Usage   *wireUsage                  `json:"usage"`
	XGroq   *struct{ Usage *wireUsage } `json:"x_groq"`
	Error   json.RawMessage             `json:"error"`
}

// reset empties c for the next chunk but keeps the choices' backing array.
// Elements are zeroed so nothing of an earlier chunk survives into a field
// the next chunk omits.
func (c *wireChunk) reset() {
	choices := c.Choices[:cap(c.Choices)]
	clear(choices)
	*c = wireChunk{Choices: choices[:0]}
}

func (c *wireChunk) usage() *wireUsage {
	if c.Usage != nil {
		return c.Usage
	}
	if c.XGroq != nil {
		return c.XGroq.Usage
	}
	return nil
}

type wireChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason string    `json:"finish_reason"`
}

type wireDelta struct {
	Content          string `json:"content"`
	Refusal          string `json:"refusal"`
	ReasoningContent string `json:"reasoning_content"`
	// Reasoning is OpenRouter's name for the same thing. It is kept raw so a
	// server that puts an object there does not break the stream.
	Reasoning json.RawMessage `json:"reasoning"`
	ToolCalls []wireToolCall  `json:"tool_calls"`
}

// thinking returns the reasoning text of the delta, preferring
// reasoning_content when a server sends both.
func (d *wireDelta) thinking() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	if len(d.Reasoning) > 0 && d.Reasoning[0] == '"' {
		var s string
		if json.Unmarshal(d.Reasoning, &s) == nil {
			return s
		}
	}
	return ""
}

type wireToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's cached-prompt count.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// llm converts usage to the neutral form. OpenAI counts cached tokens inside
// prompt_tokens; llm.Usage follows Anthropic and keeps them apart, so
// InputTokens + CacheReadTokens is the whole prompt. Reasoning tokens are part
// of OutputTokens in both APIs and ReasoningTokens only breaks them out.
func (u *wireUsage) llm() llm.Usage {
	cached := u.PromptCacheHitTokens
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > 0 {
		cached = u.PromptTokensDetails.CachedTokens
	}
	cached = min(cached, u.PromptTokens)
	out := llm.Usage{
		InputTokens:     u.PromptTokens - cached,
		OutputTokens:    u.CompletionTokens,
		CacheReadTokens: cached,
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// missingToolName names a call whose server never sent a name, so the call
// still reaches the agent (which answers "unknown tool") instead of vanishing;
// it is a valid OpenAI function name, so the history replays.
const missingToolName = "missing_tool_name"

// toolCalls follows tool-call fragments, keyed by the server's index, and
// emits start/args/end deltas with stable, unique ids.
type toolCalls struct {
	order   []*toolCall // first-seen order
	byIndex map[int]*toolCall
	used    map[string]bool
	newID   func() string
}

type toolCall struct {
	index   int
	id      string // chosen at start
	wireID  string
	name    string
	started bool
	ended   bool
	pending []byte // arguments that came before the name
}

type emitFunc func(llm.Delta) bool

// fragment applies one tool_calls entry.
func (t *toolCalls) fragment(f *wireToolCall, emit emitFunc) bool {
	c := t.lookup(f)
	if c.ended {
		// A fragment after finish_reason: nothing sane to do with it.
		return true
	}
	if c.wireID == "" {
		c.wireID = f.ID
	}
	if c.name == "" {
		// Some servers repeat the name on every fragment; the first wins.
		c.name = f.Function.Name
	}
	args := f.Function.Arguments
	if !c.started {
		if c.name == "" {
			c.pending = append(c.pending, args...)
			return true
		}
		if !t.start(c, emit) {
			return false
		}
	}
	return args == "" || emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: c.id, Args: args})
}

// lookup finds the call a fragment belongs to. Servers that omit index send
// whole calls or continue the last one; a new id means a new call.
func (t *toolCalls) lookup(f *wireToolCall) *toolCall {
	if t.byIndex == nil {
		t.byIndex = make(map[int]*toolCall)
		t.used = make(map[string]bool)
	}
	idx := 0
	switch {
	case f.Index != nil:
		idx = *f.Index
	case len(t.order) > 0:
		last := t.order[len(t.order)-1]
		idx = last.index
		if f.ID != "" && last.wireID != "" && f.ID != last.wireID {
			idx = t.freeIndex()
		}
	}
	c, ok := t.byIndex[idx]
	if !ok {
		c = &toolCall{index: idx}
		t.byIndex[idx] = c
		t.order = append(t.order, c)
	}
	return c
}

func (t *toolCalls) freeIndex() int {
	i := len(t.order)
	for t.byIndex[i] != nil {
		i++
	}
	return i
}

func (t *toolCalls) start(c *toolCall, emit emitFunc) bool {
	c.started = true
	c.id = c.wireID
	if c.id == "" || t.used[c.id] {
		c.id = t.newID()
		for t.used[c.id] {
			c.id = t.newID()
		}
	}
	t.used[c.id] = true
	if !emit(llm.Delta{Kind: llm.DeltaToolCallStart, CallID: c.id, Name: c.name}) {
		return false
	}
	if len(c.pending) > 0 {
		args := string(c.pending)
		c.pending = nil
		return emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: c.id, Args: args})
	}
	return true
}

// closeAll ends every open call in first-seen order. A call whose name never
// came is started under missingToolName first.
func (t *toolCalls) closeAll(emit emitFunc) bool {
	for _, c := range t.order {
		if c.ended {
			continue
		}
		if !c.started {
			c.name = missingToolName
			if !t.start(c, emit) {
				return false
			}
		}
		c.ended = true
		if !emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: c.id}) {
			return false
		}
	}
	return true
}
