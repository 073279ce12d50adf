package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Most of a Chat Completions request repeats from one call to the next: the
// system prompt, the tool schemas and the conversation so far. go-openai
// encodes the whole request on every call, and encoding/json re-validates
// every json.RawMessage (the schemas) each time; under load that was a fifth
// of the gateway's CPU. So go-openai is handed the request with a
// placeholder for its messages and one for its tools, encodes that small
// envelope (and validates it, builds the HTTP request, sends it and reads
// the stream, as before), and the doer splices in the arrays, encoded by
// json.Marshal of go-openai's own types — byte for byte what go-openai
// would have written — and cached: each message by its content, each tool
// list whole. The golden tests compare the spliced body with the
// encoding go-openai makes of the same request.

// The placeholders' roles cannot occur in a real request's envelope: any
// string go-openai writes there is quoted, so its quotes are escaped.
const (
	messagesMark = "nanobot-placeholder-messages"
	toolsMark    = "nanobot-placeholder-tools"
)

var (
	messagesHole = []byte(`[{"role":"` + messagesMark + `"}]`)
	toolsHole    = []byte(`[{"type":"` + toolsMark + `"}]`)
)

// encCacheBytes bounds the encoded messages kept per generation; two
// generations are kept, the older dropped when the newer fills up. 4 MiB
// holds the recent context of a few hundred active chats.
const encCacheBytes = 4 << 20

// encoder caches the encoded forms of messages and tool lists. It is safe for
// concurrent use.
type encoder struct {
	mu       sync.Mutex
	cur, old map[msgKey][]byte
	curBytes int
	lists    []toolsEntry // most recent first; a few lists (the agent's, consolidation's)
	// bufs recycles the slices a call's messages are translated into: they
	// are dead once encoded, and at ~200 bytes a message they were a
	// twelfth of the bytes a turn allocated.
	bufs sync.Pool // of *[]goopenai.ChatCompletionMessage
	// bodies recycles request bodies (see splice), which were a quarter
	// of the bytes a turn allocated.
	bodies sync.Pool // of *[]byte
}

// msgSlice returns an empty slice with room for n messages.
func (e *encoder) msgSlice(n int) []goopenai.ChatCompletionMessage {
	if b, ok := e.bufs.Get().(*[]goopenai.ChatCompletionMessage); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]goopenai.ChatCompletionMessage, 0, n)
}

// recycle takes back a slice from msgSlice once nothing reads it any more.
func (e *encoder) recycle(msgs []goopenai.ChatCompletionMessage) {
	clear(msgs) // holds no texts alive
	msgs = msgs[:0]
	e.bufs.Put(&msgs)
}

// msgKey identifies a message whose encoding is cached: one that is only a
// role and text (and, for a tool result, its call id) — system, user,
// assistant text and tool results, nearly all of a conversation.
type msgKey struct {
	role, content, toolCallID string
}

type toolsEntry struct {
	specs []llm.ToolSpec // a copy, compared with each request's
	enc   []byte
}

const maxToolLists = 4

func cacheable(m *goopenai.ChatCompletionMessage) (msgKey, bool) {
	if m.MultiContent != nil || m.ToolCalls != nil || m.FunctionCall != nil || m.Name != "" || m.Refusal != "" || m.ReasoningContent != "" {
		return msgKey{}, false
	}
	return msgKey{m.Role, m.Content, m.ToolCallID}, true
}

// messages returns the encoding of each of msgs, and their total size.
func (e *encoder) messages(msgs []goopenai.ChatCompletionMessage) ([][]byte, int, error) {
	encs := make([][]byte, len(msgs))
	size := 0
	e.mu.Lock()
	for i := range msgs {
		if k, ok := cacheable(&msgs[i]); ok {
			encs[i] = e.lookupLocked(k)
			size += len(encs[i])
		}
	}
	e.mu.Unlock()
	var fresh []int
	for i := range msgs {
		if encs[i] != nil {
			continue
		}
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return nil, 0, fmt.Errorf("encode message %d: %w", i, err)
		}
		encs[i] = b
		size += len(b)
		fresh = append(fresh, i)
	}
	if len(fresh) > 0 {
		e.mu.Lock()
		for _, i := range fresh {
			if k, ok := cacheable(&msgs[i]); ok {
				e.storeLocked(k, encs[i])
			}
		}
		e.mu.Unlock()
	}
	return encs, size, nil
}

func (e *encoder) lookupLocked(k msgKey) []byte {
	if b, ok := e.cur[k]; ok {
		return b
	}
	if b, ok := e.old[k]; ok {
		e.storeLocked(k, b) // still in use: keep it through the next turnover
		return b
	}
	return nil
}

func (e *encoder) storeLocked(k msgKey, b []byte) {
	if e.cur == nil {
		e.cur = map[msgKey][]byte{}
	}
	if _, ok := e.cur[k]; ok {
		return
	}
	n := len(b) + len(k.content)
	if e.curBytes+n > encCacheBytes {
		e.old, e.cur, e.curBytes = e.cur, map[msgKey][]byte{}, 0
	}
	e.cur[k] = b
	e.curBytes += n
}

// tools returns the JSON array of the tools for specs; out is what
// chatRequest made of them.
func (e *encoder) tools(specs []llm.ToolSpec, out []goopenai.Tool) ([]byte, error) {
	e.mu.Lock()
	for i, t := range e.lists {
		if sameTools(t.specs, specs) {
			copy(e.lists[1:i+1], e.lists[:i]) // to the front

			e.lists[0] = t
			e.mu.Unlock()
			return t.enc, nil
		}
	}
	e.mu.Unlock()
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode tools: %w", err)
	}
	own := make([]llm.ToolSpec, len(specs))
	for i, s := range specs {
		own[i] = llm.ToolSpec{Name: s.Name, Description: s.Description, Parameters: bytes.Clone(s.Parameters)}
	}
	e.mu.Lock()
	e.lists = append([]toolsEntry{{specs: own, enc: enc}}, e.lists...)
	if len(e.lists) > maxToolLists {
		e.lists = e.lists[:maxToolLists]
	}
	e.mu.Unlock()
	return enc, nil
}

func sameTools(a, b []llm.ToolSpec) bool {
	return slices.EqualFunc(a, b, func(x, y llm.ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
	})
}

// splice is the body parts the doer puts in the placeholders' place: the
// messages' encodings (joined into an array there, in one copy) and the
// tools array.
type splice struct {
	messages [][]byte
	msgSize  int
	tools    []byte

	// The body apply builds comes from bodies and goes back there once
	// net/http is done reading it (release). attempts counts the sends that
	// may read it — the first and one per GetBody, for a retry or a
	// redirect — and written those whose write has finished (httptrace's
	// WroteRequest, reported for HTTP/1 and HTTP/2 after the body, or its
	// failure).
	bodies            *sync.Pool // of *[]byte
	body              *[]byte
	attempts, written atomic.Int32
}

// maxPooledBody is the largest request body kept for reuse: a few long
// contexts must not pin their megabytes.
const maxPooledBody = 256 << 10

// buffer returns an empty slice with room for n bytes, from bodies when it
// holds one large enough, and keeps it as the body release gives back.
func (sp *splice) buffer(n int) []byte {
	if sp.bodies != nil {
		// One that is too small is dropped, not put back: the pool then
		// holds about one body per call under way, each as large as the
		// largest recent request.
		if b, ok := sp.bodies.Get().(*[]byte); ok && cap(*b) >= n {
			sp.body = b
			return (*b)[:0]
		}
	}
	b := make([]byte, 0, n)
	sp.body = &b
	return b
}

// trace is the hook that counts finished writes; it goes into the
// request's context.
func (sp *splice) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sp.written.Add(1) }}
}

// release gives the body back for another call. It is called once the call
// is over (the response read and closed), and keeps the body unless every
// send that could read it has finished writing: a retry that never got to
// write, or a write still going when an early response came, leaves the
// body to the GC.
func (sp *splice) release() {
	if sp.body == nil || sp.written.Load() != sp.attempts.Load() {
		return
	}
	b := sp.body
	sp.body = nil
	if cap(*b) > maxPooledBody {
		return
	}
	*b = (*b)[:0]
	sp.bodies.Put(b)
}

// envelope returns body with placeholders instead of its messages and tools,
// and the encoded arrays to splice in.
func (p *Provider) envelope(body goopenai.ChatCompletionRequest, specs []llm.ToolSpec) (goopenai.ChatCompletionRequest, *splice, error) {
	msgs, size, err := p.enc.messages(body.Messages)
	if err != nil {
		return body, nil, err
	}
	sp := &splice{messages: msgs, msgSize: size, bodies: &p.enc.bodies}
	body.Messages = []goopenai.ChatCompletionMessage{{Role: messagesMark}}
	if len(body.Tools) > 0 {
		if sp.tools, err = p.enc.tools(specs, body.Tools); err != nil {
			return body, nil, err
		}
		// Still one entry: go-openai's checks see that tools are sent.
		body.Tools = []goopenai.Tool{{Type: toolsMark}}
	}
	return body, sp, nil
}

// apply replaces req's body, go-openai's encoding of the envelope, with the
// whole request, and returns req with the trace that lets release reuse the
// body. The body stays one *bytes.Reader: net/http writes the headers and a
// body of that type in one write, where any other reader has it flush the
// headers first and copy the body through a fresh 32 KiB buffer (a body
// read from the pieces in place, tried, cost more than the copy it saved;
// TestRequestLeavesInOneWrite).
func (sp *splice) apply(req *http.Request) (*http.Request, error) {
	env, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request envelope: %w", err)
	}
	mi := bytes.Index(env, messagesHole)
	if mi < 0 {
		return nil, fmt.Errorf("request envelope has no messages placeholder")
	}
	ti := -1
	if sp.tools != nil {
		if ti = bytes.Index(env[mi:], toolsHole); ti < 0 {
			return nil, fmt.Errorf("request envelope has no tools placeholder")
		}
		ti += mi
	}
	out := sp.buffer(len(env) + sp.msgSize + len(sp.messages) + 1 + len(sp.tools))
	out = append(out, env[:mi]...)
	out = append(out, '[')
	for i, m := range sp.messages {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	out = append(out, ']')
	if ti < 0 {
		out = append(out, env[mi+len(messagesHole):]...)
	} else {
		out = append(out, env[mi+len(messagesHole):ti]...)
		out = append(out, sp.tools...)
		out = append(out, env[ti+len(toolsHole):]...)
	}
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.ContentLength = int64(len(out))
	req.GetBody = func() (io.ReadCloser, error) {
		sp.attempts.Add(1)
		return io.NopCloser(bytes.NewReader(out)), nil
	}
	sp.attempts.Store(1)
	return req.WithContext(httptrace.WithClientTrace(req.Context(), sp.trace())), nil
}
