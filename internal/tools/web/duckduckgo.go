package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// maxPageBytes caps a search backend's response.
const maxPageBytes = 2 << 20

// duckDuckGo searches through DuckDuckGo's HTML page, which needs no key.
// The page is parsed as HTML with CSS selectors for its result blocks.
type duckDuckGo struct {
	url    string
	client *http.Client
}

func (*duckDuckGo) name() string { return "DuckDuckGo" }

// ddgPage are the selectors a DuckDuckGo results page is read with.
type ddgPage struct{ result, title, snippet, none, botWall cascadia.Selector }

// ddgSelectors compiles them on the first search rather than at start.
var ddgSelectors = sync.OnceValue(func() ddgPage {
	return ddgPage{
		result:  cascadia.MustCompile("div.result:not(.result--ad)"),
		title:   cascadia.MustCompile("a.result__a"),
		snippet: cascadia.MustCompile(".result__snippet"),
		none:    cascadia.MustCompile(".no-results"),
		botWall: cascadia.MustCompile(".anomaly-modal, #challenge-form, form[action*='anomaly']"),
	}
})

func (d *duckDuckGo) search(ctx context.Context, query string, n int) ([]result, error) {
	form := url.Values{"q": {query}, "b": {""}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("duckduckgo: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36")
	req.Header.Set("Accept", "text/html")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("duckduckgo: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("DuckDuckGo answered %s; try again later, or set tools.web.brave_api_key to use Brave Search", resp.Status)
	}
	doc, err := html.Parse(io.LimitReader(resp.Body, maxPageBytes))
	if err != nil {
		return nil, fmt.Errorf("duckduckgo: parse results: %w", err)
	}
	sel := ddgSelectors()
	var out []result
	for _, block := range cascadia.QueryAll(doc, sel.result) {
		a := cascadia.Query(block, sel.title)
		if a == nil {
			continue
		}
		target := ddgTarget(attr(a, "href"))
		if target == "" {
			continue
		}
		r := result{Title: clean(innerText(a)), URL: target}
		if s := cascadia.Query(block, sel.snippet); s != nil {
			r.Snippet = clean(innerText(s))
		}
		out = append(out, r)
		if len(out) == n {
			break
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	switch {
	case cascadia.Query(doc, sel.botWall) != nil || resp.StatusCode == http.StatusAccepted:
		return nil, errors.New("DuckDuckGo asked for a bot check instead of answering; try again later, " +
			"or set tools.web.brave_api_key to use Brave Search")
	case cascadia.Query(doc, sel.none) != nil:
		return nil, nil
	}
	return nil, errors.New("DuckDuckGo's answer had no results nanobot could read (its page layout may have changed)")
}

// ddgTarget turns a result link into the page's URL: DuckDuckGo wraps links
// as //duckduckgo.com/l/?uddg=<url>. Ad links (y.js) and anything not
// http(s) are dropped.
func ddgTarget(href string) string {
	if strings.HasPrefix(href, "//") {
		href = "https:" + href
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(u.Hostname(), "duckduckgo.com") {
		if u.Path != "/l/" {
			return ""
		}
		if u, err = url.Parse(u.Query().Get("uddg")); err != nil {
			return ""
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return ""
	}
	return u.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
