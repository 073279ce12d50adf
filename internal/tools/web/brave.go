package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// brave searches with the Brave Search API (a key is required).
type brave struct {
	url    string
	key    string
	client *http.Client
}

func (*brave) name() string { return "Brave Search" }

// braveAnswer is the part of the API's answer that is used.
type braveAnswer struct {
	Web struct {
		Results []struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		} `json:"results"`
	} `json:"web"`
}

// braveError is the API's error body.
type braveError struct {
	Error struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"error"`
}

func (b *brave) search(ctx context.Context, query string, n int) ([]result, error) {
	q := url.Values{"q": {query}, "count": {strconv.Itoa(n)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("brave: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", b.key)
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("brave: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes))
	if err != nil {
		return nil, fmt.Errorf("brave: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, braveFailure(resp, body)
	}
	var a braveAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("brave: answer is not the expected JSON: %w", err)
	}
	var out []result
	for _, r := range a.Web.Results {
		if r.URL == "" {
			continue
		}
		out = append(out, result{Title: clean(stripTags(r.Title)), URL: r.URL, Snippet: clean(stripTags(r.Description))})
	}
	return out, nil
}

// braveFailure says what went wrong in words the model (and, through it,
// the user) can act on. The key never appears.
func braveFailure(resp *http.Response, body []byte) error {
	var e braveError
	detail := ""
	if json.Unmarshal(body, &e) == nil && e.Error.Detail != "" {
		detail = ": " + e.Error.Detail
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("Brave Search refused the API key (%s%s); the operator should check tools.web.brave_api_key", resp.Status, detail)
	case http.StatusTooManyRequests:
		return fmt.Errorf("Brave Search rate limit reached (%s%s); try again later", resp.Status, detail)
	}
	return fmt.Errorf("Brave Search answered %s%s", resp.Status, detail)
}

var tag = regexp.MustCompile(`<[^>]*>`)

// stripTags removes the <strong> highlights Brave puts in titles and
// descriptions, and decodes entities.
func stripTags(s string) string { return html.UnescapeString(tag.ReplaceAllString(s, "")) }
