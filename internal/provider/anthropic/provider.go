// Package anthropic is the provider adapter for Anthropic's Messages API. It
// turns a provider-neutral llm.Request into one streamed Messages call and
// the server's events into llm.Delta values: text, thinking (signatures
// kept, redacted thinking kept opaque), tool_use with its argument
// fragments, usage, and exactly one terminal.
//
// It speaks the REST protocol over net/http with its own small wire types
// (wire.go) rather than through the official SDK
// (github.com/anthropics/anthropic-sdk-go), which added megabytes to the
// stripped binary for the one endpoint used (docs/providers-anthropic.md has
// the figures). Only
// the config counts: no ANTHROPIC_* variable is read. The adapter makes
// exactly one attempt per call: the router retries and falls back.
//
// The request conversion (request.go) is where the provider-neutral history
// meets Anthropic's rules: system prompt apart, roles alternating, all tool
// results of a turn in one user message right after the tool calls, thinking
// replayed only to Anthropic. It never fails on a history the agent could
// produce: what cannot be sent as is, is repaired and logged. Only the
// daemon and doctor construct it; everything else reaches it through
// provider.Streamer.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// API is the value of llm.Meta.API for messages this adapter produced.
const API = "anthropic"

const (
	// apiVersion is the anthropic-version header: the wire format this
	// adapter was written against.
	apiVersion = "2023-06-01"
	// maxModelList bounds the model list read for doctor.
	maxModelList = 4 << 20
)

// Provider is one configured Anthropic endpoint. It is safe for concurrent
// use; each Stream call is independent.
type Provider struct {
	name    string
	cfg     config.ProviderConfig
	root    string // base URL without /v1, e.g. https://api.anthropic.com
	http    *http.Client
	timeout time.Duration
	log     *zap.Logger
}

// New builds the adapter for providers.<name>. It does no I/O. A nil
// httpClient means a client of its own (its Timeout should be zero: a
// stream can run for minutes); cfg.Timeout, when set, bounds each call from
// connect to last event. cfg.MaxRetries is the router's business: the
// adapter makes exactly one attempt per Stream.
func New(name string, cfg config.ProviderConfig, httpClient *http.Client, log *zap.Logger) *Provider {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	root := baseURL(cfg.BaseURL) // config's default and Validate own it
	return &Provider{
		name:    name,
		cfg:     cfg,
		root:    root,
		http:    httpClient,
		timeout: cfg.Timeout,
		log:     log,
	}
}

// baseURL drops a trailing /v1: the adapter adds /v1/messages itself, and a
// base URL copied from OpenAI-style configs ends in /v1.
func baseURL(s string) string {
	s = strings.TrimRight(s, "/")
	return strings.TrimSuffix(s, "/v1")
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

// Name is the configured provider name.
func (p *Provider) Name() string { return p.name }

// Stream sends req as one streamed Messages call. See provider.Streamer for
// the contract: a start, content deltas, exactly one terminal; stopping the
// iteration cancels the call.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	p = p.withLog(ctx)
	return func(yield func(llm.Delta) bool) {
		callCtx, cancel := httpcall.Context(ctx, p.timeout)
		defer cancel()
		e := llm.NewEmitter(yield, llm.Meta{Provider: p.name, API: API, Model: req.Model})
		body, err := p.request(req)
		if err != nil {
			e.Fail(fmt.Errorf("anthropic %s: build request: %w", p.name, err))
			return
		}
		resp, err := p.do(callCtx, http.MethodPost, "/v1/messages", body)
		if err != nil {
			e.Fail(p.streamError(ctx, callCtx, err, nil))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			e.Fail(p.responseError(ctx, callCtx, resp))
			return
		}
		d := decoder{p: p, e: e}
		if err := d.read(resp); !e.Done() {
			// message_start already counted the prompt: Anthropic bills a
			// stream that breaks afterwards, so its usage goes out first.
			if d.usage != (llm.Usage{}) {
				e.Emit(llm.Delta{Kind: llm.DeltaUsage, Usage: d.usage})
			}
			e.Fail(p.streamError(ctx, callCtx, err, resp))
		}
	}
}

// do sends one request with the key, the API version and the configured
// extra headers (which may override the others).
func (p *Provider) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	return httpcall.Do(ctx, p.http, method, p.root+path, body, p.cfg.ExtraHeaders, func(h http.Header) {
		h.Set("anthropic-version", apiVersion)
		if body != nil {
			h.Set("content-type", "application/json")
			h.Set("accept", "text/event-stream")
		} else {
			h.Set("accept", "application/json")
		}
		if p.cfg.APIKey != "" {
			h.Set("x-api-key", p.cfg.APIKey)
		}
	})
}

// Models lists the model ids the endpoint offers (first page, GET
// /v1/models), for doctor: the cheapest call that proves the server is
// reachable and the key accepted. Failures are *llm.APIError like Stream's.
func (p *Provider) Models(ctx context.Context) ([]string, error) {
	fail := func(err error) ([]string, error) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("anthropic %s: list models: %w", p.name, ctx.Err())
		}
		return nil, err
	}
	resp, err := p.do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return fail(&llm.APIError{Provider: p.name, Message: "request failed", Err: err})
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fail(p.responseError(ctx, ctx, resp))
	}
	var list wireModelList
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelList)).Decode(&list); err != nil {
		return fail(&llm.APIError{Provider: p.name, Message: "request failed",
			Err: fmt.Errorf("GET /v1/models: model list is not valid JSON: %w", err)})
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
