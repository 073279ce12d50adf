// Package gemini is the provider adapter for Google's Gemini API
// (generativelanguage.googleapis.com, API key). It turns a provider-neutral
// llm.Request into one streamed generateContent call
// (`:streamGenerateContent?alt=sse`) and the server's chunks into
// llm.Delta values: text, thought summaries, function calls with their
// thought signatures, usage, and exactly one terminal.
//
// It speaks the REST protocol over net/http with its own small wire types
// rather than through the official SDK (google.golang.org/genai): the SDK
// links gRPC, Cloud auth and OpenCensus, many times the binary budget an
// adapter has; the figures are in docs/providers-gemini.md.
//
// The request conversion (request.go) is where the neutral history meets
// Gemini's rules: roles user and model alternating, a turn's function
// responses grouped in one user turn right after its function calls, in
// call order, and thought signatures replayed only to Gemini. Only the daemon
// and doctor construct it; everything else reaches it through
// provider.Streamer. It never reads the environment.
package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// API is the value of llm.Meta.API for messages this adapter produced.
const API = "gemini"

// maxModelList bounds the model list read for doctor (about 50 kB today).
const maxModelList = 4 << 20

// apiVersion is appended to a base_url without a path: v1beta is where
// thinking, thought signatures and parametersJsonSchema are served.
const apiVersion = "v1beta"

// Provider is one configured Gemini endpoint. It is safe for concurrent
// use; each Stream call is independent.
type Provider struct {
	name    string
	cfg     config.ProviderConfig
	root    string // API root, e.g. https://generativelanguage.googleapis.com/v1beta
	http    *http.Client
	log     *zap.Logger
	timeout time.Duration
	// newID is replaced in tests.
	newID func() string
}

// New builds the adapter for providers.<name>. It does no I/O. A nil
// httpClient means a client of its own (its Timeout should be zero: a
// stream can run for minutes; cfg.Timeout bounds each call instead).
// cfg.MaxRetries is the router's business: one attempt per Stream.
func New(name string, cfg config.ProviderConfig, httpClient *http.Client, log *zap.Logger) *Provider {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Provider{
		name:    name,
		cfg:     cfg,
		root:    apiRoot(cfg.BaseURL),
		http:    httpClient,
		log:     log,
		timeout: cfg.Timeout,
		newID:   randomCallID,
	}
}

// apiRoot is base_url with /v1beta appended when it has no path of its own;
// a base_url with a path (a proxy, or .../v1beta written out) is the root.
// base_url is config's (Load sets its kind row's BaseURL for a gemini
// provider that leaves it out).
func apiRoot(base string) string {
	base = strings.TrimRight(base, "/")
	if u, err := url.Parse(base); err == nil && u.Path == "" {
		return base + "/" + apiVersion
	}
	return base
}

// Name is the configured provider name.
func (p *Provider) Name() string { return p.name }

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

// Stream sends req as one streamed generateContent call. See
// provider.Streamer for the contract: a start, content deltas, exactly one
// terminal; stopping the iteration cancels the call.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	p = p.withLog(ctx)
	return func(yield func(llm.Delta) bool) {
		e := llm.NewEmitter(yield, llm.Meta{Provider: p.name, API: API, Model: req.Model})
		if !e.Start() {
			return
		}
		if err := ctx.Err(); err != nil {
			e.Fail(fmt.Errorf("gemini %s: %w", p.name, err))
			return
		}
		body, err := p.request(req)
		if err != nil {
			e.Fail(fmt.Errorf("gemini %s: build request: %w", p.name, err))
			return
		}
		callCtx, cancel := httpcall.Context(ctx, p.timeout)
		defer cancel()
		target := p.root + "/models/" + url.PathEscape(req.Model) + ":streamGenerateContent?alt=sse"
		resp, err := p.do(callCtx, http.MethodPost, target, body)
		if err != nil {
			e.Fail(p.transportError(ctx, callCtx, err, false))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			e.Fail(p.statusError(resp))
			return
		}
		d := decoder{p: p, e: e, seen: map[string]bool{}}
		d.read(ctx, callCtx, resp.Body)
	}
}

// do sends one request with the key and the configured extra headers.
func (p *Provider) do(ctx context.Context, method, target string, body []byte) (*http.Response, error) {
	return httpcall.Do(ctx, p.http, method, target, body, p.cfg.ExtraHeaders, func(h http.Header) {
		if body != nil {
			h.Set("Content-Type", "application/json")
		}
		// The key goes in a header, never the URL, so that it cannot end up
		// in an error message that quotes the URL.
		if p.cfg.APIKey != "" {
			h.Set("x-goog-api-key", p.cfg.APIKey)
		}
	})
}

// Models lists the model ids the endpoint offers (first page, without the
// "models/" prefix), for doctor: the cheapest call that proves the server
// is reachable and the key accepted. Failures are *llm.APIError like
// Stream's.
func (p *Provider) Models(ctx context.Context) ([]string, error) {
	callCtx, cancel := httpcall.Context(ctx, p.timeout)
	defer cancel()
	resp, err := p.do(callCtx, http.MethodGet, p.root+"/models?pageSize=1000", nil)
	if err != nil {
		return nil, p.transportError(ctx, callCtx, err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, p.statusError(resp)
	}
	var list wireModelList
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelList)).Decode(&list); err != nil {
		return nil, &llm.APIError{Provider: p.name, Status: resp.StatusCode, Type: "invalid_response",
			Message: "model list is not valid JSON", Err: err}
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, strings.TrimPrefix(m.Name, "models/"))
	}
	return ids, nil
}
