// Package openai is the adapter for OpenAI's Chat Completions API and every
// endpoint that copies it (OpenRouter, DeepSeek, Groq, Ollama, vLLM, ...). It
// turns a provider-neutral llm.Request into a streaming request through
// github.com/sashabaranov/go-openai and the server's chunks into llm.Deltas.
//
// Only the daemon constructs it (New); everything else reaches it through the
// provider.Streamer interface. It never reads the environment: key, base URL
// and extra headers all come from config.ProviderConfig.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	chunkJSON "github.com/segmentio/encoding/json"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// API is the wire-protocol name recorded in llm.Meta for this adapter.
const API = "openai"

// maxEmptyLines bounds consecutive non-data SSE lines (keep-alive comments
// such as OpenRouter's ": OPENROUTER PROCESSING"). go-openai's default of 300
// can be reached by a slow reasoning model behind a proxy; the call's timeout
// is the real bound.
const maxEmptyLines = 10000

// Provider streams chat completions from one configured endpoint. It is safe
// for concurrent use: each Stream call builds its own client state.
type Provider struct {
	name    string
	cfg     config.ProviderConfig
	baseURL string
	http    *http.Client
	log     *zap.Logger
	enc     *encoder // shared by the copies withLog makes
	// newID is replaced in tests.
	newID func() string
	// drainWait bounds the wait for the end of a finished stream's body
	// (doer.drain); tests give a slow machine longer.
	drainWait time.Duration
}

// New returns the adapter for providers.<name>. httpClient may be nil (a
// plain client is used); its Timeout should be zero because a stream can run
// for minutes: cfg.Timeout bounds each call instead. New does no I/O.
func New(name string, cfg config.ProviderConfig, httpClient *http.Client, log *zap.Logger) *Provider {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Provider{
		name:      name,
		cfg:       cfg,
		baseURL:   cfg.BaseURL, // config's default and Validate own it
		http:      httpClient,
		log:       log,
		enc:       &encoder{},
		newID:     randomCallID,
		drainWait: drainWait,
	}
}

// withLog returns p logging with the fields ctx carries (the turn id), for
// one call. Provider holds no lock, so the copy is cheap and safe.
func (p *Provider) withLog(ctx context.Context) *Provider {
	log := logging.From(ctx, p.log)
	if log == p.log {
		return p
	}
	c := *p
	c.log = log
	return &c
}

// Name is the configured provider name (providers.<name>).
func (p *Provider) Name() string { return p.name }

// randomCallID makes an id for a tool call the server sent without one. It is
// random rather than a counter because sessions outlive the process and the
// history may be replayed to Anthropic, which rejects duplicate tool_use ids
// anywhere in a request.
func randomCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "call_" + hex.EncodeToString(b[:])
}

// Stream sends req as a streaming chat completion and yields its deltas (see
// provider.Streamer for the contract). Stopping the iteration early closes
// the response body and cancels the request.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	return func(yield func(llm.Delta) bool) {
		s := stream{p: p.withLog(ctx), yield: yield}
		s.run(ctx, req)
	}
}

// stream is the state of one Stream call; it lives on the consumer's
// goroutine and starts none of its own.
type stream struct {
	p       *Provider
	yield   func(llm.Delta) bool
	seq     int
	stopped bool
	calls   toolCalls
	finish  string
	// refused is set when the model sent a refusal instead of content.
	refused bool
	usage   *wireUsage
}

// emit numbers d and hands it to the consumer; false means stop now.
func (s *stream) emit(d llm.Delta) bool {
	if s.stopped {
		return false
	}
	s.seq++
	d.Seq = s.seq
	if !s.yield(d) {
		s.stopped = true
		return false
	}
	return true
}

func (s *stream) fail(err error) {
	s.p.log.Debug("stream failed", zap.String("provider", s.p.name), zap.Error(err))
	s.emit(llm.Delta{Kind: llm.DeltaError, Err: err})
}

// begin sends the start delta and opens the call's context; false means the
// stream is over already (the consumer stopped or the caller gave up).
func (s *stream) begin(parent context.Context, api, model string) (context.Context, context.CancelFunc, bool) {
	if !s.emit(llm.Delta{Kind: llm.DeltaStart, Meta: &llm.Meta{Provider: s.p.name, API: api, Model: model}}) {
		return nil, nil, false
	}
	if err := parent.Err(); err != nil {
		s.fail(err)
		return nil, nil, false
	}
	ctx, cancel := httpcall.Context(parent, s.p.cfg.Timeout)
	return ctx, cancel, true
}

func (s *stream) run(parent context.Context, req llm.Request) {
	p := s.p
	ctx, cancel, ok := s.begin(parent, API, req.Model)
	if !ok {
		return
	}
	defer cancel()

	body := p.chatRequest(req)
	p.log.Debug("chat completion", zap.String("provider", p.name), zap.String("model", req.Model),
		zap.Int("messages", len(body.Messages)), zap.Int("tools", len(body.Tools)))
	env, sp, err := p.envelope(body, req.Tools)
	p.enc.recycle(body.Messages) // encoded into sp, or not needed after the error
	if err != nil {
		s.fail(fmt.Errorf("%s: build request: %w", p.name, err))
		return
	}
	d := &doer{client: p.http, extra: p.cfg.ExtraHeaders, splice: sp}
	cs, err := p.client(d).CreateChatCompletionStream(ctx, env)
	if err != nil {
		d.closeBody()
		s.fail(p.callError(parent, ctx, d, err))
		return
	}
	defer func() {
		if d.ended {
			d.drain(cancel, p.drainWait)
		}
		_ = cs.Close()
		sp.release() // after Close: net/http may still hold the request until then
	}()
	s.read(parent, ctx, cs, d)
}

// client is a go-openai client for one call, sending through d.
func (p *Provider) client(d *doer) *goopenai.Client {
	cc := goopenai.DefaultConfig(p.cfg.APIKey)
	cc.BaseURL = p.baseURL
	cc.HTTPClient = d
	cc.EmptyMessagesLimit = maxEmptyLines
	return goopenai.NewClientWithConfig(cc)
}

// read turns the response's chunks into deltas until the stream ends.
func (s *stream) read(parent, ctx context.Context, cs *goopenai.ChatCompletionStream, d *doer) {
	p := s.p
	s.calls.newID = p.newID
	var c wireChunk // reused: one stream decodes thousands of small chunks
	for {
		raw, err := cs.RecvRaw()
		switch {
		case errors.Is(err, io.EOF):
			d.ended = true
			s.end(parent, ctx)
			return
		case err != nil:
			s.fail(p.callError(parent, ctx, d, err))
			return
		case raw == nil:
			// go-openai saw a `data: {"error":` line it could not decode
			// (e.g. a bare string); it does not hand over the text.
			s.fail(&llm.APIError{Provider: p.name, Type: "stream_error", Message: "unreadable error event in stream"})
			return
		}
		c.reset()
		// segmentio/encoding decodes the way encoding/json does (a test
		// holds it to that) with 13 → 5 allocations per chunk; it is
		// already in the binary, through the MCP SDK.
		if err := chunkJSON.Unmarshal(raw, &c); err != nil {
			p.log.Warn("unreadable stream chunk", zap.String("provider", p.name), zap.ByteString("chunk", httpcall.Clip(raw, 200)), zap.Error(err))
			s.fail(&llm.APIError{Provider: p.name, Type: "invalid_chunk", Message: "unreadable stream chunk: " + err.Error(), Err: err})
			return
		}
		if !s.handle(&c) {
			return
		}
	}
}

// handle turns one chunk into deltas; false means the stream is over.
func (s *stream) handle(c *wireChunk) bool {
	if len(c.Error) > 0 && string(c.Error) != "null" {
		s.fail(s.p.bodyError(c.Error))
		return false
	}
	if u := c.usage(); u != nil {
		// Some servers repeat a running total on every chunk; keep the last.
		s.usage = u
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 { // we ask for one choice; ignore any other
			continue
		}
		if !s.delta(&ch.Delta) {
			return false
		}
		if ch.FinishReason == "" {
			continue
		}
		if ch.FinishReason == "error" { // OpenRouter's mid-stream failure
			s.fail(&llm.APIError{Provider: s.p.name, Type: "stream_error", Message: "provider ended the stream with finish_reason error"})
			return false
		}
		s.finish = ch.FinishReason
		if !s.calls.closeAll(s.emit) {
			return false
		}
	}
	return true
}

func (s *stream) delta(d *wireDelta) bool {
	if t := d.thinking(); t != "" && !s.emit(llm.Delta{Kind: llm.DeltaThinking, Text: t}) {
		return false
	}
	if d.Content != "" && !s.emit(llm.Delta{Kind: llm.DeltaText, Text: d.Content}) {
		return false
	}
	if d.Refusal != "" {
		// The refusal's words are the answer the user reads; the stop
		// reason says it was one.
		s.refused = true
		if !s.emit(llm.Delta{Kind: llm.DeltaText, Text: d.Refusal}) {
			return false
		}
	}
	for i := range d.ToolCalls {
		if !s.calls.fragment(&d.ToolCalls[i], s.emit) {
			return false
		}
	}
	return true
}

// end handles the end of the body: done when the server said it finished,
// otherwise the stream was cut short.
func (s *stream) end(parent, ctx context.Context) {
	if s.finish == "" {
		switch {
		case parent.Err() != nil:
			s.fail(parent.Err())
		case ctx.Err() != nil:
			s.fail(s.p.timeoutError(ctx.Err()))
		default:
			s.fail(fmt.Errorf("%s: stream ended without a finish reason: %w", s.p.name, llm.ErrTruncated))
		}
		return
	}
	if s.usage != nil && !s.emit(llm.Delta{Kind: llm.DeltaUsage, Usage: s.usage.llm()}) {
		return
	}
	s.emit(llm.Delta{Kind: llm.DeltaDone, StopReason: chatStop(s.finish, s.refused)})
}

// chatStop normalises a Chat Completions finish_reason
// (docs/reliability.md#every-turn-ends-with-something-to-read); a refusal ends
// with "stop" on the wire.
func chatStop(r string, refused bool) llm.StopReason {
	switch r {
	case "stop":
		if refused {
			return llm.StopRefusal
		}
		return llm.StopEnd
	case "tool_calls", "function_call":
		return llm.StopToolCalls
	case "length":
		return llm.StopLength
	case "content_filter":
		return llm.StopSafety
	}
	return llm.StopOther
}
