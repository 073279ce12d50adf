package web

import (
	"bytes"
	stdhtml "html"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
)

// md renders model Markdown for the page. Raw HTML in the input is left out
// (no html.WithUnsafe), and goldmark drops dangerous link destinations
// (javascript:, vbscript:, file:, data: other than images); the page's CSP
// and its own check of the result are the second and third lines of defence.
var md = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// renderMarkdown returns the HTML of text; on a renderer error (none is
// expected) it falls back to the escaped text in a paragraph.
func renderMarkdown(text string) string {
	var b bytes.Buffer
	if err := md.Convert([]byte(text), &b); err != nil {
		b.Reset()
		b.WriteString("<p>")
		b.WriteString(stdhtml.EscapeString(text))
		b.WriteString("</p>")
	}
	return b.String()
}
