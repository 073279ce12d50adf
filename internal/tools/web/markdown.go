package web

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
)

// minArticleChars: an extracted article shorter than this is probably a
// wrong guess (a cookie banner, a teaser), so the whole page is used.
const minArticleChars = 200

// markdowner turns HTML pages into Markdown.
type markdowner struct {
	conv *converter.Converter
}

func newMarkdowner() *markdowner {
	return &markdowner{conv: converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(), table.NewTablePlugin(),
	))}
}

// page is a converted HTML page.
type page struct {
	Title    string
	Markdown string
	// Article is set when only the main content was kept.
	Article bool
}

// convert parses body (UTF-8) and converts it. Unless full is set, the
// main content is picked first (see mainContent), so navigation, footers
// and ads do not eat the model's context.
func (m *markdowner) convert(body []byte, pageURL *url.URL, full bool) (page, error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return page{}, fmt.Errorf("parse html: %w", err)
	}
	p := page{Title: documentTitle(doc)}
	node := doc
	if !full {
		if art := mainContent(doc); art != nil && len(innerText(art)) >= minArticleChars {
			node, p.Article = art, true
		}
	}
	dropJunk(node, full || !p.Article)
	md, err := m.conv.ConvertNode(node, converter.WithDomain(pageURL.String()))
	if err != nil {
		return page{}, fmt.Errorf("convert html: %w", err)
	}
	p.Markdown = strings.TrimSpace(string(md))
	return p, nil
}

// documentTitle is the text of the page's <title>.
func documentTitle(doc *html.Node) string {
	var title string
	var walk func(*html.Node) bool
	walk = func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "title" {
			title = innerText(n)
			return true
		}
		if n.Type == html.ElementNode && n.Data == "body" {
			return true // titles live in head
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if walk(c) {
				return true
			}
		}
		return false
	}
	walk(doc)
	return strings.Join(strings.Fields(title), " ")
}

// innerText is the text of n's subtree, without script and style, with
// whitespace collapsed. Inline elements join their text as written
// ("<b>go</b>lang" is "golang"); block elements and line breaks separate.
func innerText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
		case n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style"):
			return
		case n.Type == html.ElementNode && !inline[n.Data]:
			b.WriteByte(' ')
			defer b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// inline are the elements whose text runs on with their neighbours'.
var inline = map[string]bool{
	"a": true, "abbr": true, "b": true, "bdi": true, "bdo": true, "cite": true, "code": true, "data": true,
	"dfn": true, "em": true, "i": true, "kbd": true, "mark": true, "q": true, "s": true, "samp": true,
	"small": true, "span": true, "strong": true, "sub": true, "sup": true, "time": true, "u": true, "var": true,
}
