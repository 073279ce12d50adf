package discord

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
)

func TestTransportRewritesDiscordHost(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset-After", "60")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		apiURL, in, want string
	}{
		{srv.URL, "https://discord.com/api/v9/users/@me", host + " /api/v9/users/@me"},
		{srv.URL + "/proxy/discord/", "https://discord.com/api/v9/gateway?x=1", host + " /proxy/discord/api/v9/gateway?x=1"},
		// Attachments live on Discord's CDN (here: any other host); not rewritten.
		{srv.URL + "/p", srv.URL + "/attachments/1/a.png", host + " /attachments/1/a.png"},
	}
	for _, tt := range tests {
		tr, err := newTransport(http.DefaultTransport, tt.apiURL, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", tt.in, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-RateLimit-Remaining") != "" {
			t.Errorf("rate-limit headers reached discordgo: %v", resp.Header)
		}
		mu.Lock()
		got := seen[len(seen)-1]
		mu.Unlock()
		if got != tt.want {
			t.Errorf("%s via %s went to %q, want %q", tt.in, tt.apiURL, got, tt.want)
		}
	}
}

func TestTransportRejectsBadAPIURL(t *testing.T) {
	for _, u := range []string{"ftp://x", "discord.com", "http://"} {
		if _, err := newTransport(http.DefaultTransport, u, time.Now); err == nil {
			t.Errorf("api_url %q accepted", u)
		}
	}
	tr, err := newTransport(http.DefaultTransport, "https://discord.com", time.Now)
	if err != nil || tr.target != nil {
		t.Errorf("the default api_url should not rewrite: %v %v", tr.target, err)
	}
}

func TestTransportRateLimits(t *testing.T) {
	var calls int
	var mu sync.Mutex
	status, body, header := 429, "", http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		for k, v := range header {
			w.Header()[k] = v
		}
		st, b := status, body
		mu.Unlock()
		w.WriteHeader(st)
		_, _ = io.WriteString(w, b)
	}))
	defer srv.Close()
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tr, _ := newTransport(http.DefaultTransport, srv.URL, clock)
	do := func(method, path string) error {
		req, _ := http.NewRequest(method, "https://discord.com"+path, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	set := func(st int, b string, h http.Header) {
		mu.Lock()
		status, body, header = st, b, h
		mu.Unlock()
	}
	var rl *channels.RateLimitError

	tests := []struct {
		name   string
		body   string
		header http.Header
		want   time.Duration
	}{
		{"JSON retry_after in fractional seconds", `{"message":"You are being rate limited.","retry_after":1.5,"global":false}`, nil, 1500 * time.Millisecond},
		{"Retry-After header for a non-JSON 429", `<html>cloudflare</html>`, http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"nothing usable: one second", ``, nil, time.Second},
	}
	for _, tt := range tests {
		set(429, tt.body, tt.header)
		if err := do("POST", "/api/v9/channels/1/messages"); !errors.As(err, &rl) || rl.RetryAfter != tt.want {
			t.Errorf("%s: %v, want RateLimitError %s", tt.name, err, tt.want)
		}
		advance(tt.want)
	}

	// While a route is limited, calls fail fast without reaching Discord;
	// another route is unaffected; an edit of another message in the same
	// channel shares the bucket.
	set(429, `{"retry_after":2}`, nil)
	_ = do("PATCH", "/api/v9/channels/1/messages/10")
	set(200, `{}`, nil)
	mu.Lock()
	before := calls
	mu.Unlock()
	if err := do("PATCH", "/api/v9/channels/1/messages/11"); !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Errorf("same bucket while limited: %v", err)
	}
	if err := do("POST", "/api/v9/channels/2/typing"); err != nil {
		t.Errorf("other route: %v", err)
	}
	mu.Lock()
	if calls != before+1 {
		t.Errorf("%d calls reached the server, want 1 (the other route)", calls-before)
	}
	mu.Unlock()
	advance(2 * time.Second)
	if err := do("PATCH", "/api/v9/channels/1/messages/11"); err != nil {
		t.Errorf("after retry_after: %v", err)
	}

	// A global limit blocks every route.
	set(429, `{"retry_after":0.5,"global":true}`, nil)
	_ = do("POST", "/api/v9/channels/3/messages")
	set(200, `{}`, nil)
	if err := do("GET", "/api/v9/users/@me"); !errors.As(err, &rl) {
		t.Errorf("during a global limit: %v", err)
	}
	advance(500 * time.Millisecond)
	if err := do("GET", "/api/v9/users/@me"); err != nil {
		t.Errorf("after the global limit: %v", err)
	}
}

func TestTransportUnknownOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		_ = c.Close() // read the request, never answer
	}))
	defer srv.Close()
	tr, _ := newTransport(http.DefaultTransport, srv.URL, time.Now)
	for _, tt := range []struct {
		method  string
		unknown bool
	}{{"POST", true}, {"PATCH", false}, {"DELETE", false}} {
		req, _ := http.NewRequest(tt.method, "https://discord.com/api/v9/channels/1/messages", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		var uo *channels.UnknownOutcomeError
		if err == nil || errors.As(err, &uo) != tt.unknown {
			t.Errorf("%s hung up after sending: %v, unknown outcome %v", tt.method, err, tt.unknown)
		}
	}
	// A refused connection never reached Discord: safe to retry.
	srv.Close()
	req, _ := http.NewRequest("POST", "https://discord.com/api/v9/channels/1/messages", strings.NewReader("{}"))
	if resp, err := tr.RoundTrip(req); err == nil || errors.As(err, new(*channels.UnknownOutcomeError)) {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("refused connection: %v, want a plain (retryable) error", err)
	}
}

func TestRouteKey(t *testing.T) {
	tests := map[string]string{
		"PATCH /api/v9/channels/1/messages/99": "PATCH /api/v9/channels/1/messages/{id}",
		"POST /api/v9/channels/1/messages":     "POST /api/v9/channels/1/messages",
		"POST /api/v9/channels/2/typing":       "POST /api/v9/channels/2/typing",
	}
	for in, want := range tests {
		m, p, _ := strings.Cut(in, " ")
		if got := routeKey(m, p); got != want {
			t.Errorf("routeKey(%s) = %s, want %s", in, got, want)
		}
	}
}
