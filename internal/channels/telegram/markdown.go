package telegram

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// MaxMessageLen is Telegram's limit for one message's text, in UTF-16 code
// units.
const MaxMessageLen = 4096

// NewRenderer returns the Telegram renderer: Markdown → Telegram HTML,
// split under MaxMessageLen measured in UTF-16 units after conversion and
// escaping (the markup counts too, which keeps chunks safely under the
// limit Telegram applies after parsing).
func NewRenderer() channels.MarkupRenderer {
	return channels.MarkupRenderer{
		Limit:   MaxMessageLen,
		Measure: UTF16Len,
		Markup:  ToHTML,
		Plain:   ToPlain,
	}
}

// UTF16Len counts s in UTF-16 code units, as Telegram does.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r) // an invalid byte reads as U+FFFD: one unit
	}
	return n
}

var md = goldmark.New(goldmark.WithExtensions(
	extension.Table, extension.Strikethrough, extension.Linkify, extension.TaskList,
))

// ToHTML converts Markdown to the HTML subset Telegram accepts with
// parse_mode HTML: b, i, s, code, pre (with a language class), a, and
// blockquote. Headings become bold lines, lists get bullets or numbers,
// tables become monospace <pre> blocks, and everything else is escaped text,
// so the result always parses, whatever the input.
func ToHTML(markdown string) string { return render(markdown, true) }

// ToPlain converts Markdown to readable plain text with the same layout as
// ToHTML but no markup, for drafts and for when Telegram refuses the HTML.
func ToPlain(markdown string) string { return render(markdown, false) }

func render(markdown string, html bool) string {
	if plainLine(markdown) {
		// What goldmark would parse into one paragraph of one text node:
		// the same output without building and walking a document, which
		// showed in the gateway's CPU profile under load, where most
		// replies are like it (docs/BENCHMARKS.md#figures-behind-code-choices).
		if html {
			return escapeString(markdown)
		}
		return markdown
	}
	return renderMarkdown(markdown, html)
}

// renderMarkdown renders through goldmark's document.
func renderMarkdown(markdown string, html bool) string {
	// Telegram refuses invalid UTF-8; replace it before anything else.
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	doc := md.Parser().Parse(text.NewReader(src))
	r := &renderer{src: src, html: html}
	r.blocks(doc, "\n\n")
	return strings.TrimRight(r.b.String(), " \n")
}

// plainLine reports whether s is one line of text in which Markdown sees
// nothing but text: no character that can open an inline (emphasis, code,
// links, images, HTML, entities, escapes, strikethrough), none that can
// start a block at the line's start (headings, lists, quotes, breaks, code
// by indentation), nothing Linkify turns into a link (a scheme, www., an
// email address), and no whitespace at either end, which a paragraph trims.
// It is conservative: a false answer only means the full render.
func plainLine(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	switch c := s[0]; {
	case c >= '0' && c <= '9', c == '-', c == '+', c == '=', c == ' ':
		return false // an ordered or bullet list, a break, indentation
	}
	if c := s[len(s)-1]; c == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n', '\r', '\t', '\f', '\v', '\\', '`', '*', '_', '[', ']', '!', '<', '>', '&', '~', '|', '#', '@':
			return false
		case ':':
			if strings.HasPrefix(s[i:], "://") {
				return false
			}
		case 'w', 'W':
			if len(s)-i >= 4 && strings.EqualFold(s[i:i+4], "www.") {
				return false
			}
		}
	}
	return true
}

type renderer struct {
	src   []byte
	html  bool
	b     strings.Builder
	quote int // blockquote depth: Telegram cannot nest blockquotes
	code  int // inside code or pre: no entity may nest there
}

func (r *renderer) esc(s string) {
	if !r.html {
		r.b.WriteString(s)
		return
	}
	for _, c := range s {
		switch c {
		case '&':
			r.b.WriteString("&amp;")
		case '<':
			r.b.WriteString("&lt;")
		case '>':
			r.b.WriteString("&gt;")
		case '"':
			r.b.WriteString("&quot;")
		default:
			r.b.WriteRune(c)
		}
	}
}

// tag writes a markup tag in HTML mode.
func (r *renderer) tag(s string) {
	if r.html {
		r.b.WriteString(s)
	}
}

// blocks renders n's children, separated by sep.
func (r *renderer) blocks(n ast.Node, sep string) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if !first {
			r.b.WriteString(sep)
		}
		first = false
		r.block(c)
	}
}

func (r *renderer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		r.tag("<b>")
		r.inlines(n)
		r.tag("</b>")
	case *ast.ThematicBreak:
		r.b.WriteString("──────────")
	case *ast.FencedCodeBlock:
		r.pre(n, string(n.Language(r.src)))
	case *ast.CodeBlock:
		r.pre(n, "")
	case *ast.Blockquote:
		if r.quote == 0 {
			r.tag("<blockquote>")
		}
		r.quote++
		r.blocks(n, "\n\n")
		r.quote--
		if r.quote == 0 {
			r.tag("</blockquote>")
		}
	case *ast.List:
		r.list(n)
	case *ast.HTMLBlock:
		r.esc(strings.TrimRight(r.lines(n), "\n"))
		if n.HasClosure() {
			r.b.WriteString("\n")
			r.esc(string(n.ClosureLine.Value(r.src)))
		}
	case *extast.Table:
		r.table(n)
	default:
		// Unknown block (an extension's): keep its text.
		r.blocks(n, "\n\n")
	}
}

// langRe is what a code block's language may be, in at most 32 characters
// (validLang). The length is checked apart: {1,32} in the pattern would
// compile into a program many times larger, at start (sizes:
// docs/BENCHMARKS.md#figures-behind-code-choices).
var langRe = regexp.MustCompile(`^[A-Za-z0-9_+#.\-]+$`)

func validLang(s string) bool { return len(s) <= 32 && langRe.MatchString(s) }

func (r *renderer) pre(n ast.Node, lang string) {
	body := strings.TrimRight(r.lines(n), "\n")
	if !validLang(lang) {
		lang = ""
	}
	switch {
	case lang != "":
		r.tag(`<pre><code class="language-` + lang + `">`)
	default:
		r.tag("<pre>")
	}
	r.esc(body)
	if lang != "" {
		r.tag("</code></pre>")
	} else {
		r.tag("</pre>")
	}
}

func (r *renderer) lines(n ast.Node) string {
	var b bytes.Buffer
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(r.src))
	}
	return b.String()
}

func (r *renderer) list(l *ast.List) {
	num := l.Start
	first := true
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		if !first {
			r.b.WriteString("\n")
		}
		first = false
		marker := "• "
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		// Render the item on its own, then indent its continuation lines
		// under the marker so nested lists and paragraphs line up.
		sub := &renderer{src: r.src, html: r.html, quote: r.quote, code: r.code}
		sub.blocks(item, "\n")
		body := strings.TrimRight(sub.b.String(), "\n")
		indent := strings.Repeat(" ", utf8.RuneCountInString(marker))
		r.b.WriteString(marker)
		r.b.WriteString(strings.ReplaceAll(body, "\n", "\n"+indent))
	}
}

func (r *renderer) table(t *extast.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			sub := &renderer{src: r.src, html: false}
			sub.inlines(cell)
			cells = append(cells, strings.ReplaceAll(sub.b.String(), "\n", " "))
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		if ri > 0 {
			b.WriteString("\n")
		}
		for i, c := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		if ri == 0 && len(rows) > 1 {
			b.WriteString("\n")
			for i, w := range widths {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", w))
			}
		}
	}
	r.tag("<pre>")
	r.esc(b.String())
	r.tag("</pre>")
}

func (r *renderer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *renderer) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		r.esc(string(n.Segment.Value(r.src)))
		if n.SoftLineBreak() || n.HardLineBreak() {
			r.b.WriteString("\n")
		}
	case *ast.String:
		r.esc(string(n.Value))
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(r.src))
			} else if s, ok := c.(*ast.String); ok {
				b.Write(s.Value)
			}
		}
		r.tag("<code>")
		r.esc(b.String())
		r.tag("</code>")
	case *ast.Emphasis:
		open, close := "<i>", "</i>"
		if n.Level >= 2 {
			open, close = "<b>", "</b>"
		}
		r.tag(open)
		r.inlines(n)
		r.tag(close)
	case *extast.Strikethrough:
		r.tag("<s>")
		r.inlines(n)
		r.tag("</s>")
	case *ast.Link:
		r.link(string(n.Destination), func() { r.inlines(n) }, n.FirstChild() != nil)
	case *ast.AutoLink:
		u := string(n.URL(r.src))
		label := string(n.Label(r.src))
		r.link(u, func() { r.esc(label) }, true)
	case *ast.Image:
		label := func() { r.inlines(n) }
		if n.FirstChild() == nil {
			label = func() { r.esc("image") }
		}
		r.link(string(n.Destination), label, true)
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			r.esc(string(seg.Value(r.src)))
		}
	case *extast.TaskCheckBox:
		if n.IsChecked {
			r.b.WriteString("☑ ")
		} else {
			r.b.WriteString("☐ ")
		}
	default:
		r.inlines(n)
	}
}

// link writes a link when its URL is one Telegram accepts, otherwise the
// label followed by the URL in parentheses, so nothing is lost.
func (r *renderer) link(dest string, label func(), hasLabel bool) {
	ok := safeURL(dest)
	if !hasLabel {
		label = func() { r.esc(dest) }
	}
	if r.html && ok {
		r.b.WriteString(`<a href="`)
		r.esc(dest)
		r.b.WriteString(`">`)
		label()
		r.b.WriteString("</a>")
		return
	}
	start := r.b.Len()
	label()
	shown := r.b.String()[start:]
	if dest != "" && shown != dest && shown != escapeString(dest) {
		r.b.WriteString(" (")
		r.esc(dest)
		r.b.WriteString(")")
	}
}

func safeURL(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\n<>\"") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host != ""
	case "tg", "mailto":
		return true
	}
	return false
}

func escapeString(s string) string {
	r := &renderer{html: true}
	r.esc(s)
	return r.b.String()
}

// stripHTML returns what Telegram shows for Telegram HTML: tags removed and
// entities decoded. It is used to measure and to build plain fallbacks.
func stripHTML(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			j := strings.IndexByte(s[i:], '>')
			if j < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			i += j + 1
		case '&':
			j := strings.IndexByte(s[i:], ';')
			if j < 0 {
				b.WriteByte('&')
				i++
				continue
			}
			switch ent := s[i+1 : i+j]; ent {
			case "amp":
				b.WriteByte('&')
			case "lt":
				b.WriteByte('<')
			case "gt":
				b.WriteByte('>')
			case "quot":
				b.WriteByte('"')
			default:
				fmt.Fprintf(&b, "&%s;", ent)
			}
			i += j + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
