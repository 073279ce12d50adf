package web

import (
	"regexp"
	"strings"
	"sync"

	"golang.org/x/net/html"
)

// mainContent picks a page's main content the way most pages mark it up
// today: the biggest <article>, else <main> (or role="main"), else the body
// without its chrome. It is a deliberately small stand-in for Mozilla's
// Readability scoring (whose Go port costs over a megabyte of binary and is
// quadratic on large pages); dropJunk then removes what is left of menus,
// banners and scripts inside it. It returns nil for a page without a body.
func mainContent(doc *html.Node) *html.Node {
	var articles, mains []*html.Node
	var body *html.Node
	walkElements(doc, func(n *html.Node) bool {
		switch {
		case n.Data == "article":
			articles = append(articles, n)
		case n.Data == "main", attrValue(n, "role") == "main":
			mains = append(mains, n)
		case n.Data == "body":
			body = n
		}
		return true
	})
	if best := largest(articles); best != nil && len(innerText(best)) >= minArticleChars {
		return best
	}
	if best := largest(mains); best != nil {
		return best
	}
	return body
}

// largest returns the node with the most text.
func largest(nodes []*html.Node) *html.Node {
	var best *html.Node
	bestLen := -1
	for _, n := range nodes {
		if l := len(innerText(n)); l > bestLen {
			best, bestLen = n, l
		}
	}
	return best
}

// junkTags never carry content a reader wants.
var junkTags = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "iframe": true, "svg": true,
	"canvas": true, "object": true, "embed": true,
}

// chromeTags are page furniture: dropped from the main content, kept in a
// full-page conversion.
var chromeTags = map[string]bool{
	"nav": true, "header": true, "footer": true, "aside": true, "form": true, "button": true, "dialog": true,
}

// chromeClass matches class or id values of banners, menus and widgets. It
// is compiled when a page is first read, not at start: a daemon that never
// fetches a page does not hold its program (docs/BENCHMARKS.md#figures-behind-code-choices).
var chromeClass = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[\s_-])(cookie|consent|banner|nav|navbar|menu|sidebar|footer|breadcrumbs?|share|social|related|promo|advert|ads?|popup|modal|newsletter|subscribe|comments?)([\s_-]|$)`)
})

// dropJunk removes scripts and styles everywhere and, unless full is set,
// the page chrome below n.
func dropJunk(n *html.Node, full bool) {
	var doomed []*html.Node
	walkElements(n, func(c *html.Node) bool {
		if c == n {
			return true
		}
		if junkTags[c.Data] || (!full && (chromeTags[c.Data] || isChrome(c))) {
			doomed = append(doomed, c)
			return false
		}
		return true
	})
	for _, d := range doomed {
		if d.Parent != nil {
			d.Parent.RemoveChild(d)
		}
	}
}

func isChrome(n *html.Node) bool {
	if r := attrValue(n, "role"); r == "navigation" || r == "banner" || r == "contentinfo" || r == "complementary" {
		return true
	}
	return chromeClass().MatchString(attrValue(n, "class")) || chromeClass().MatchString(attrValue(n, "id"))
}

// walkElements calls fn on every element below n (n included) in document
// order; fn returning false skips the element's children.
func walkElements(n *html.Node, fn func(*html.Node) bool) {
	if n.Type == html.ElementNode && !fn(n) {
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walkElements(c, fn)
	}
}

func attrValue(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}
