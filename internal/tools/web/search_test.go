package web

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// fakeDDG serves DuckDuckGo's HTML endpoint the way the real one works: a
// POSTed form with q, answered with a results page (or another page).
type fakeDDG struct {
	t      *testing.T
	page   string // testdata file to answer with
	status int
	mu     sync.Mutex
	query  string
}

func (f *fakeDDG) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/html/" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.query = r.PostForm.Get("q")
	f.mu.Unlock()
	body, err := os.ReadFile(filepath.Join("testdata", f.page))
	if err != nil {
		f.t.Error(err)
	}
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	if f.status != 0 {
		w.WriteHeader(f.status)
	}
	_, _ = w.Write(body)
}

func newSearch(t *testing.T, cfg SearchConfig, h http.Handler) *Search {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.DuckDuckGoURL, cfg.BraveURL = srv.URL+"/html/", srv.URL+"/res/v1/web/search"
	cfg.Client = srv.Client()
	t.Cleanup(cfg.Client.CloseIdleConnections)
	if cfg.MaxResults == 0 { // the default of config, as the daemon passes it
		cfg.MaxResults = config.Defaults().Tools.Web.MaxResults
	}
	return NewSearch(cfg, zaptest.NewLogger(t))
}

func TestDuckDuckGoResults(t *testing.T) {
	ddg := &fakeDDG{t: t, page: "ddg_results.html"}
	s := newSearch(t, SearchConfig{MaxResults: 5}, ddg)
	res := run(t, s, map[string]any{"query": "golang generics"})
	want := `Results for "golang generics" (DuckDuckGo):

1. Tutorial: Getting started with generics - The Go Programming Language
   https://go.dev/doc/tutorial/generics
   This tutorial introduces the basics of generics in Go. With generics, you can declare and use functions or types that are written to work with any of a set of types.

2. An Introduction To Generics
   https://go.dev/blog/intro-generics?utm=x&y=1
   The Go 1.18 release adds support for generics. Generics are the biggest change we've made to Go.

3. constraints package - golang.org/x/exp/constraints
   https://pkg.go.dev/golang.org/x/exp/constraints
   Package constraints defines a set of useful constraints.`
	if res.IsError || res.Text != want {
		t.Errorf("result:\n%s\nwant:\n%s", res.Text, want)
	}
	if ddg.query != "golang generics" {
		t.Errorf("query sent = %q", ddg.query)
	}
	if strings.Contains(res.Text, "Sponsored") || strings.Contains(res.Text, "javascript:") {
		t.Errorf("ads or non-web links kept:\n%s", res.Text)
	}

	two := run(t, s, map[string]any{"query": "golang generics", "count": 2})
	if strings.Count(two.Text, "\n   https://") != 2 {
		t.Errorf("count 2 gave:\n%s", two.Text)
	}
}

func TestSearchResultsCappedAtMaxResults(t *testing.T) {
	s := newSearch(t, SearchConfig{MaxResults: 1}, &fakeDDG{t: t, page: "ddg_results.html"})
	res := run(t, s, map[string]any{"query": "golang generics", "count": 10})
	if strings.Count(res.Text, "\n   https://") != 1 {
		t.Errorf("max_results 1 gave:\n%s", res.Text)
	}
	if spec := s.Spec(); !strings.Contains(string(spec.Parameters), `"maximum": 1`) {
		t.Errorf("schema does not cap count: %s", spec.Parameters)
	}
}

func TestDuckDuckGoOtherAnswers(t *testing.T) {
	tests := []struct {
		name    string
		ddg     *fakeDDG
		isError bool
		want    string
	}{
		{"no results", &fakeDDG{page: "ddg_none.html"}, false, `No results for "q" (DuckDuckGo).`},
		{"bot check", &fakeDDG{page: "ddg_botcheck.html", status: http.StatusAccepted}, true,
			"DuckDuckGo asked for a bot check instead of answering; try again later, or set tools.web.brave_api_key"},
		{"layout changed", &fakeDDG{page: "article.html"}, true, "no results nanobot could read (its page layout may have changed)"},
		{"server error", &fakeDDG{page: "ddg_none.html", status: http.StatusServiceUnavailable}, true, "DuckDuckGo answered 503 Service Unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ddg.t = t
			res := run(t, newSearch(t, SearchConfig{}, tc.ddg), map[string]any{"query": "q"})
			if res.IsError != tc.isError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("result = %+v, want is_error=%v and %q", res, tc.isError, tc.want)
			}
		})
	}
}

// fakeBrave serves the Brave Search API: GET with q and count, the key in
// X-Subscription-Token, JSON answers and JSON errors.
func fakeBrave(t *testing.T, key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"ErrorResponse","error":{"code":"NOT_FOUND","detail":"Not found.","status":404}}`))
		case r.Header.Get("X-Subscription-Token") != key:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"ErrorResponse","error":{"id":"x","status":401,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid."},"time":1}`))
		case r.URL.Query().Get("q") == "flood":
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"ErrorResponse","error":{"status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`))
		default:
			if got := r.URL.Query().Get("count"); got != "3" {
				t.Errorf("count = %q, want 3", got)
			}
			_, _ = w.Write([]byte(`{"type":"search","query":{"original":"` + r.URL.Query().Get("q") + `"},"web":{"type":"search","results":[
{"title":"The <strong>Go</strong> Programming Language","url":"https://go.dev/","description":"Go is an open source programming language that makes it simple to build <strong>secure</strong>, scalable systems &amp; more.","language":"en"},
{"title":"Go (programming language) - Wikipedia","url":"https://en.wikipedia.org/wiki/Go_(programming_language)","description":"Go is a statically typed, compiled language."},
{"title":"no url","url":"","description":"dropped"}]}}`))
		}
	})
}

func TestBraveResults(t *testing.T) {
	s := newSearch(t, SearchConfig{Provider: "brave", BraveAPIKey: "brave-key-123", MaxResults: 3}, fakeBrave(t, "brave-key-123"))
	res := run(t, s, map[string]any{"query": "golang"})
	want := `Results for "golang" (Brave Search):

1. The Go Programming Language
   https://go.dev/
   Go is an open source programming language that makes it simple to build secure, scalable systems & more.

2. Go (programming language) - Wikipedia
   https://en.wikipedia.org/wiki/Go_(programming_language)
   Go is a statically typed, compiled language.`
	if res.IsError || res.Text != want {
		t.Errorf("result:\n%s\nwant:\n%s", res.Text, want)
	}
}

func TestBraveErrorsNeverShowTheKey(t *testing.T) {
	tests := []struct {
		name, key, query, want string
	}{
		{"bad key", "wrong-key-456", "golang", "Brave Search refused the API key (401 Unauthorized: The provided subscription token is invalid.); the operator should check tools.web.brave_api_key"},
		{"rate limit", "brave-key-123", "flood", "Brave Search rate limit reached (429 Too Many Requests: Request rate limit exceeded for plan.); try again later"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSearch(t, SearchConfig{BraveAPIKey: tc.key, MaxResults: 3}, fakeBrave(t, "brave-key-123"))
			res := run(t, s, map[string]any{"query": tc.query})
			if !res.IsError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("result = %+v, want %q", res, tc.want)
			}
			if strings.Contains(res.Text, tc.key) {
				t.Errorf("the key appears in the result: %s", res.Text)
			}
		})
	}
}

// A Brave key selects Brave even when search_provider was left at its
// default; without one, DuckDuckGo is used.
func TestSearchBackendChoice(t *testing.T) {
	tests := []struct {
		cfg  SearchConfig
		want string
	}{
		{SearchConfig{}, "DuckDuckGo"},
		{SearchConfig{Provider: "duckduckgo"}, "DuckDuckGo"},
		{SearchConfig{Provider: "brave", BraveAPIKey: "k"}, "Brave Search"},
		{SearchConfig{Provider: "duckduckgo", BraveAPIKey: "k"}, "Brave Search"},
	}
	for _, tc := range tests {
		if got := NewSearch(tc.cfg, zaptest.NewLogger(t)).backend.name(); got != tc.want {
			t.Errorf("%+v: backend %s, want %s", tc.cfg, got, tc.want)
		}
	}
}

func TestToolsRegisterAsReadOnly(t *testing.T) {
	reg := tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
	fetch := NewFetch(FetchConfig{MaxBytes: config.Defaults().Tools.Web.FetchMaxBytes}, zaptest.NewLogger(t))
	for _, tool := range []tools.Tool{NewSearch(SearchConfig{}, zaptest.NewLogger(t)), fetch} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	if !reg.ReadOnly("web_search") || !reg.ReadOnly("web_fetch") {
		t.Error("web tools must be read-only so parallel calls are allowed")
	}
}
