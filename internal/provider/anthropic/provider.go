// Package anthropic is the provider adapter for Anthropic's Messages API, on
// the official Go SDK. It turns a provider-neutral llm.Request into one
// streamed Messages call and the server's events into llm.Delta values:
// text, thinking (signatures kept, redacted thinking kept opaque), tool_use
// with its argument fragments, usage, and exactly one terminal.
//
// The SDK client is built without reading the environment
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles... are ignored: only the
// config counts), without its own retries (the router retries and falls back)
// and without OpenTelemetry spans.
//
// The request conversion (request.go) is where the provider-neutral history
// meets Anthropic's rules: system prompt apart, roles alternating, all tool
// results of a turn in one user message right after the tool calls, thinking
// replayed only to Anthropic. It never fails on a history the agent could
// produce: what cannot be sent as is, is repaired and logged.
package anthropic

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
)

// API is the value of llm.Meta.API for messages this adapter produced.
const API = "anthropic"

// Provider is one configured Anthropic endpoint. It is safe for concurrent
// use; each Stream call is independent.
type Provider struct {
	name    string
	client  sdk.Client
	timeout time.Duration
	log     *zap.Logger
	// now reads the clock for Retry-After dates.
	now func() time.Time
}

// New builds the adapter for providers.<name>. It does no I/O. A nil
// httpClient means a client of its own; cfg.Timeout, when set, bounds each
// call from connect to last event. cfg.MaxRetries is the router's business:
// the adapter makes exactly one attempt per Stream.
func New(name string, cfg config.ProviderConfig, httpClient *http.Client, log *zap.Logger) *Provider {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	opts := []option.RequestOption{
		// Only the config counts: no ANTHROPIC_* variables, no profile files.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(httpClient),
		// The router owns retries, backoff and fallback.
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
	}
	if base := baseURL(cfg.BaseURL); base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	for k, v := range cfg.ExtraHeaders {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &Provider{
		name:    name,
		client:  sdk.NewClient(opts...),
		timeout: cfg.Timeout,
		log:     log,
		now:     time.Now,
	}
}

// baseURL drops a trailing /v1: the SDK adds v1/messages itself, and a base
// URL copied from OpenAI-style configs ends in /v1.
func baseURL(s string) string {
	s = strings.TrimRight(s, "/")
	return strings.TrimSuffix(s, "/v1")
}

// withLog returns p logging with the fields ctx carries (the turn id), for
// one call. Provider holds no lock (the SDK client is a value of option
// lists and services), so the copy is cheap and safe.
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
		callCtx, cancel := p.callContext(ctx)
		defer cancel()
		e := llm.NewEmitter(yield, llm.Meta{Provider: p.name, API: API, Model: req.Model})
		params, err := p.params(req)
		if err != nil {
			e.Fail(fmt.Errorf("anthropic %s: build request: %w", p.name, err))
			return
		}
		var resp *http.Response
		stream := p.client.Messages.NewStreaming(callCtx, params, option.WithResponseInto(&resp))
		defer stream.Close()
		d := decoder{p: p, e: e}
		for stream.Next() {
			if !d.event(stream.Current()) {
				return
			}
		}
		if e.Done() {
			return
		}
		e.Fail(p.streamError(ctx, callCtx, stream.Err(), resp))
	}
}

// callContext applies the configured per-call timeout.
func (p *Provider) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.timeout > 0 {
		return context.WithTimeout(ctx, p.timeout)
	}
	return context.WithCancel(ctx)
}

// Models lists the model ids the endpoint offers (first page), for doctor.
// Failures are *llm.APIError like Stream's.
func (p *Provider) Models(ctx context.Context) ([]string, error) {
	var resp *http.Response
	page, err := p.client.Models.List(ctx, sdk.ModelListParams{}, option.WithResponseInto(&resp))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("anthropic %s: list models: %w", p.name, ctx.Err())
		}
		return nil, p.apiError(err, resp)
	}
	ids := make([]string, 0, len(page.Data))
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
