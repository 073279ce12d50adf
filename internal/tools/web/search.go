package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// Public endpoints of the search backends.
const (
	DuckDuckGoURL = "https://html.duckduckgo.com/html/"
	BraveURL      = "https://api.search.brave.com/res/v1/web/search"
)

// SearchConfig configures web_search. Zero values take the defaults.
type SearchConfig struct {
	// Provider is "duckduckgo" or "brave" (tools.web.search_provider).
	// Brave is also used whenever BraveAPIKey is set: a key is only ever
	// configured to be used.
	Provider    string
	BraveAPIKey string
	// MaxResults caps the results of one search (tools.web.max_results);
	// taken as given.
	MaxResults int
	// Timeout bounds one search [DefaultSearchTimeout].
	Timeout time.Duration
	// DuckDuckGoURL and BraveURL replace the public endpoints, for tests and
	// self-hosted mirrors.
	DuckDuckGoURL string
	BraveURL      string
	// Client makes the requests [a client using the environment's proxy].
	Client *http.Client
}

// result is one search hit.
type result struct {
	Title, URL, Snippet string
}

// backend is one search engine.
type backend interface {
	name() string
	search(ctx context.Context, query string, n int) ([]result, error)
}

// Search is the web_search tool.
type Search struct {
	max     int
	backend backend
	log     *zap.Logger
}

var _ tools.Tool = (*Search)(nil)

// DefaultSearchTimeout bounds one search. Not a config key: a search engine
// that has not answered in 15s will not, and the model is waiting.
const DefaultSearchTimeout = 15 * time.Second

// NewSearch returns web_search. It does no I/O.
func NewSearch(cfg SearchConfig, log *zap.Logger) *Search {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultSearchTimeout
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	s := &Search{max: cfg.MaxResults, log: log}
	if cfg.Provider == "brave" || cfg.BraveAPIKey != "" {
		s.backend = &brave{url: or(cfg.BraveURL, BraveURL), key: cfg.BraveAPIKey, client: client}
	} else {
		s.backend = &duckDuckGo{url: or(cfg.DuckDuckGoURL, DuckDuckGoURL), client: client}
	}
	return s
}

// ReadOnly: searching changes nothing, so calls may run in parallel.
func (*Search) ReadOnly() bool { return true }

// Spec describes the tool.
func (s *Search) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "web_search",
		Description: fmt.Sprintf("Search the web. Returns up to %d results, each with title, URL and snippet. "+
			"Use web_fetch to read a result.", s.max),
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "What to search for."},
    "count": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many results. Default %d."}
  },
  "required": ["query"]
}`, s.max, s.max)),
	}
}

type searchArgs struct {
	Query string `json:"query"`
	Count int    `json:"count"`
}

// Run searches and lists the results.
func (s *Search) Run(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	a, err := tools.DecodeArgs[searchArgs]("web_search", inv)
	if err != nil {
		return tools.Result{}, err
	}
	q := strings.TrimSpace(a.Query)
	if q == "" {
		return tools.Result{}, errors.New("query is empty")
	}
	n := s.max
	if a.Count > 0 && a.Count < n {
		n = a.Count
	}
	results, err := s.backend.search(ctx, q, n)
	if err != nil {
		s.log.Warn("web search failed", zap.String("backend", s.backend.name()), zap.Error(err))
		return tools.Result{}, err
	}
	if len(results) > n {
		results = results[:n]
	}
	if len(results) == 0 {
		return tools.Result{Text: fmt.Sprintf("No results for %q (%s).", q, s.backend.name())}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Results for %q (%s):\n", q, s.backend.name())
	for i, r := range results {
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, r.Title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "   %s\n", r.Snippet)
		}
	}
	return tools.Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// clean collapses whitespace, for titles and snippets.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }
