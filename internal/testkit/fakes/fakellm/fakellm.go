// Package fakellm is the scripted model behind the OpenAI, Anthropic and
// Gemini fake servers. A test pushes the replies the model should give, in
// order (or sets a Func that decides per request), and reads back every
// request the fake received in a provider-neutral form as well as raw.
package fakellm

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Call is a tool call the fake model makes.
type Call struct {
	ID   string
	Name string
	// Args is sent verbatim, so a test can send arguments that are not JSON.
	Args string
}

// Reply is one scripted model answer, or one scripted failure.
type Reply struct {
	Thinking  string
	Signature string // Anthropic thinking signature; a default is used when empty
	Text      string
	ToolCalls []Call
	// InputTokens and OutputTokens are reported as usage (defaults derived
	// from the sizes when zero).
	InputTokens, OutputTokens int
	// CachedTokens is reported as the part of the input served from the
	// provider's prompt cache (OpenAI cached_tokens).
	CachedTokens int
	// NoUsage sends no usage at all, as some OpenAI-compatible servers do
	// (the OpenAI fake's Chat Completions stream and Responses).
	NoUsage bool

	// Status, when non-zero, answers the request with this HTTP status and an
	// error body of the API's shape (ErrorType, ErrorMessage) instead of a stream.
	Status       int
	ErrorType    string
	ErrorMessage string
	// RetryAfter sets the Retry-After header (seconds, as a string).
	RetryAfter string

	// Stop, when set, ends the answer with this stop reason instead of the
	// natural one (stop, or tool_calls after calls). Each fake writes it in
	// its own protocol's words; a reason a protocol lacks becomes the
	// nearest one it has (each fake maps them in one function). With
	// llm.StopRefusal, Text is sent as the refusal where the protocol has
	// one (OpenAI Chat and Responses).
	Stop llm.StopReason

	// Truncate ends the stream after the content without a finish reason or
	// stop event, as a dropped connection would.
	Truncate bool
	// MidStreamError sends an error event of the API's shape after the
	// content and ends the stream.
	MidStreamError string
	// Garbage sends one chunk that is not valid JSON after the first content.
	Garbage bool
	// Chunk is how many bytes of text go in one delta [8].
	Chunk int
	// Delay is slept before answering (cancelled with the request).
	Delay time.Duration
	// ChunkDelay is slept between deltas.
	ChunkDelay time.Duration
	// HoldEnd, when set, keeps the response open after its last event
	// until the channel is closed, so the end of the body (HTTP/1's last
	// chunk) reaches the client after the stream's end, as it may over a
	// real network. The OpenAI fake's Chat Completions stream honours it.
	HoldEnd <-chan struct{}
	// HoldAfterFirst, when set, holds the stream after its first content
	// chunk until the channel is closed, so a test can see what the first
	// token set off before the rest arrives, however slow the machine. The
	// OpenAI fake's Chat Completions stream honours it.
	HoldAfterFirst <-chan struct{}

	// RedactedThinking, when set, is sent (Anthropic) as one redacted_thinking
	// block carrying this opaque data, before any thinking.
	RedactedThinking string
	// CacheReadTokens and CacheWriteTokens are reported as prompt-cache usage
	// (Anthropic cache_read_input_tokens / cache_creation_input_tokens).
	CacheReadTokens, CacheWriteTokens int
	// RetryAfterMS sets the retry-after-ms header (milliseconds, as a
	// string); the Gemini fake sends it as RetryInfo's retryDelay instead.
	RetryAfterMS string
}

// Message is one message of a request, as the fake understood it.
type Message struct {
	Role        string // "user", "assistant", "tool" (OpenAI) — Anthropic tool results arrive as role "user"
	Text        string
	Images      int
	ToolCalls   []Call
	ToolResults []Result

	// Thinking is the reasoning replayed in the message (Anthropic thinking
	// blocks), concatenated; RedactedThinking counts redacted blocks.
	Thinking         string
	RedactedThinking int
}

// Result is a tool result inside a request.
type Result struct {
	CallID  string
	Content string
	IsError bool
}

// Request is what the fake received.
type Request struct {
	Path       string
	Header     http.Header
	Raw        []byte
	Model      string
	System     string
	Messages   []Message
	Tools      []string
	ToolChoice string // forced tool name, if any
	MaxTokens  int
	Stream     bool

	// ThinkingBudget is the requested extended-thinking budget (0: off).
	ThinkingBudget int

	// Received is when the server began handling the request, before reading
	// its body (zero where a fake does not set it), so a caller can tell the
	// fake's own time from its client's.
	Received time.Time
}

// LastUserText returns the text of the last user message that has text.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" && r.Messages[i].Text != "" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// Script hands out replies in order and records requests. Safe for
// concurrent use. The zero value answers every request with "ok".
type Script struct {
	mu       sync.Mutex
	replies  []Reply
	requests []Request
	// Func, when set, decides replies once the queue is empty.
	Func func(Request) Reply
	// Discard, when set, keeps no requests (Requests returns none): for
	// long runs (bench/cmd/nanobot-bench) that would otherwise hold every request
	// body in memory.
	Discard bool
	// ContextWindow, when positive, is the model's context window in
	// tokens: a request whose prompt (counted by Tokens) plus its reply cap
	// exceeds it is refused with a 400 context_length_exceeded, as a real
	// server refuses it, before any scripted reply is used.
	ContextWindow int
	// Tokens counts a request's prompt tokens for ContextWindow [about one
	// per four bytes of its texts, see Request.Bytes]; a test that checks
	// the agent's projection gives it the agent's estimate.
	Tokens func(Request) int
}

// Texts calls f with every text of r's prompt: the system prompt, the
// messages' texts and thinking, tool calls' names and arguments, tool
// results.
func (r Request) Texts(f func(string)) {
	f(r.System)
	for _, m := range r.Messages {
		f(m.Text)
		f(m.Thinking)
		for _, c := range m.ToolCalls {
			f(c.Name)
			f(c.Args)
		}
		for _, res := range m.ToolResults {
			f(res.Content)
		}
	}
}

// Bytes is the length of r's prompt texts (see Texts).
func (r Request) Bytes() int {
	n := 0
	r.Texts(func(s string) { n += len(s) })
	return n
}

// tokens counts req's prompt as the model does.
func (s *Script) tokens(req Request) int {
	if s.Tokens != nil {
		return s.Tokens(req)
	}
	return (req.Bytes() + 3) / 4
}

// Push appends replies to the queue.
func (s *Script) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

// Next records req and returns the reply to give.
func (s *Script) Next(req Request) Reply {
	s.mu.Lock()
	if !s.Discard {
		s.requests = append(s.requests, req)
	}
	if w := s.ContextWindow; w > 0 {
		if n := s.tokens(req); n+req.MaxTokens > w {
			s.mu.Unlock()
			return Reply{Status: 400, ErrorType: "context_length_exceeded", ErrorMessage: fmt.Sprintf(
				"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion).",
				w, n+req.MaxTokens, n, req.MaxTokens)}
		}
	}
	if len(s.replies) > 0 {
		r := s.replies[0]
		s.replies = s.replies[1:]
		s.mu.Unlock()
		return r
	}
	f := s.Func
	s.mu.Unlock()
	if f != nil {
		return f(req)
	}
	return Reply{Text: "ok"}
}

// Requests returns a copy of every request received so far.
func (s *Script) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Forget drops the requests recorded so far, so a long run measuring the
// memory of the code under test does not count the fake's log.
func (s *Script) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Pending is the number of queued replies not yet used.
func (s *Script) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// StopReason is the stop reason the reply ends with: Stop, or the natural
// one.
func (r Reply) StopReason() llm.StopReason {
	switch {
	case r.Stop != "":
		return r.Stop
	case len(r.ToolCalls) > 0:
		return llm.StopToolCalls
	}
	return llm.StopEnd
}
