package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// discordHost is where discordgo sends every REST call (its endpoints are
// package variables fixed at init).
const discordHost = "discord.com"

// transport is the http.RoundTripper under discordgo's REST client. It
//
//   - sends requests for discord.com to api_url instead (same paths), so
//     tests and proxies work without touching discordgo's globals;
//   - owns rate limiting: a 429 becomes a *channels.RateLimitError (discordgo
//     would sleep and retry it forever), and later calls on the same route,
//     or on every route after a global limit, fail fast with the time still
//     to wait instead of hammering Discord into a Cloudflare ban;
//   - strips the X-RateLimit-* headers before discordgo sees them, because
//     discordgo's own bucket limiter sleeps without a context while holding
//     a lock, which would make sends uncancellable and shutdown hang;
//   - marks a failure after a POST reached the wire as
//     *channels.UnknownOutcomeError, so a message that may have been posted
//     is never posted twice.
type transport struct {
	base   http.RoundTripper
	target *url.URL // nil: no rewrite
	now    func() time.Time

	mu      sync.Mutex
	blocked map[string]time.Time // route → end of its rate limit
	global  time.Time
}

func newTransport(base http.RoundTripper, apiURL string, now func() time.Time) (*transport, error) {
	t := &transport{base: base, now: now, blocked: map[string]time.Time{}}
	if apiURL == "" {
		return t, nil
	}
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("api_url %q: %w", apiURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("api_url %q: want an http(s) URL with a host", apiURL)
	}
	if u.Host != discordHost || strings.TrimSuffix(u.Path, "/") != "" {
		t.target = u
	}
	return t, nil
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.target != nil && req.URL.Host == discordHost {
		req = req.Clone(req.Context())
		req.URL.Scheme = t.target.Scheme
		req.URL.Host = t.target.Host
		req.URL.Path = strings.TrimSuffix(t.target.Path, "/") + req.URL.Path
		req.Host = ""
	}
	route := routeKey(req.Method, req.URL.Path)
	if wait := t.waitFor(route); wait > 0 {
		return nil, &channels.RateLimitError{RetryAfter: wait, Err: errors.New("discord: route still rate limited")}
	}

	var wrote bool
	var wroteMu sync.Mutex
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		wroteMu.Lock()
		wrote = true
		wroteMu.Unlock()
	}}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil {
		wroteMu.Lock()
		sent := wrote
		wroteMu.Unlock()
		// GETs, PATCHes (edits to the same text) and DELETEs can be repeated
		// safely; a POST that reached Discord may have created a message.
		if sent && req.Method == http.MethodPost {
			return nil, &channels.UnknownOutcomeError{Err: err}
		}
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return nil, t.rateLimited(route, resp)
	}
	stripRateLimitHeaders(resp.Header)
	return resp, nil
}

// waitFor returns how long route is still blocked.
func (t *transport) waitFor(route string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	until := t.blocked[route]
	if t.global.After(until) {
		until = t.global
	}
	if !until.After(now) {
		delete(t.blocked, route)
		return 0
	}
	return until.Sub(now)
}

// rateLimited records a 429 and turns it into a RateLimitError. Discord's
// body carries retry_after in fractional seconds and whether the limit is
// global; Retry-After (whole seconds) is the fallback, e.g. for Cloudflare's
// HTML 429 pages.
func (t *transport) rateLimited(route string, resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var rl struct {
		Message    string  `json:"message"`
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	_ = json.Unmarshal(body, &rl)
	wait := secondsToDuration(rl.RetryAfter)
	if wait <= 0 {
		if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil {
			wait = secondsToDuration(s)
		}
	}
	if wait <= 0 {
		wait = time.Second
	}
	global := rl.Global || resp.Header.Get("X-RateLimit-Global") == "true"
	t.mu.Lock()
	until := t.now().Add(wait)
	if global {
		t.global = until
	} else {
		t.blocked[route] = until
	}
	t.mu.Unlock()
	scope := "route"
	if global {
		scope = "global"
	}
	return &channels.RateLimitError{RetryAfter: wait, Err: fmt.Errorf("discord: 429 (%s) on %s", scope, route)}
}

func secondsToDuration(s float64) time.Duration {
	if s <= 0 || math.IsNaN(s) || s > 24*3600 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

func stripRateLimitHeaders(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "X-Ratelimit-") {
			delete(h, k)
		}
	}
}

// snowflakeAfter matches ids that are not part of Discord's rate-limit
// bucket: a message id after /messages/ (edits and deletes of one channel
// share a bucket); channel and guild ids (major parameters) stay.
var snowflakeAfter = regexp.MustCompile(`/messages/\d+`)

func routeKey(method, path string) string {
	return method + " " + snowflakeAfter.ReplaceAllString(path, "/messages/{id}")
}
