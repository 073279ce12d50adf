package telegram

import (
	stdhtml "html"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

func TestToHTMLExamples(t *testing.T) {
	tests := []struct{ in, html, plain string }{
		{"**b** _i_ ~~s~~", "<b>b</b> <i>i</i> <s>s</s>", "b i s"},
		{"a < b && c > d", "a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"},
		{"`<x>`", "<code>&lt;x&gt;</code>", "<x>"},
		{"# Title", "<b>Title</b>", "Title"},
		{"```go\nx := 1\n```", `<pre><code class="language-go">x := 1</code></pre>`, "x := 1"},
		{"```we\"ird lang\nx\n```", "<pre>x</pre>", "x"},
		{"[t](https://a.b/?q=1&r=2)", `<a href="https://a.b/?q=1&amp;r=2">t</a>`, "t (https://a.b/?q=1&r=2)"},
		{"[t](ftp://x)", "t (ftp://x)", "t (ftp://x)"},
		{"- a\n- b", "• a\n• b", "• a\n• b"},
		{"3. a\n4. b", "3. a\n4. b", "3. a\n4. b"},
		{"> q", "<blockquote>q</blockquote>", "q"},
		{"half **open", "half **open", "half **open"},
		{"<script>x</script>", "&lt;script&gt;x&lt;/script&gt;", "<script>x</script>"},
		{"line one\nline two", "line one\nline two", "line one\nline two"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ToHTML(tt.in); got != tt.html {
				t.Errorf("ToHTML(%q)\n got %q\nwant %q", tt.in, got, tt.html)
			}
			if got := ToPlain(tt.in); got != tt.plain {
				t.Errorf("ToPlain(%q)\n got %q\nwant %q", tt.in, got, tt.plain)
			}
			if _, err := telegramfake.ParseHTML(ToHTML(tt.in)); err != nil {
				t.Errorf("Telegram would refuse ToHTML(%q): %v", tt.in, err)
			}
		})
	}
}

// TestGolden renders testdata/*.md and compares with the .html and .txt
// files next to them (go test -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.md")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for ext, conv := range map[string]func(string) string{".html": ToHTML, ".txt": ToPlain} {
			got := conv(string(src)) + "\n"
			golden.Check(t, strings.TrimSuffix(f, ".md")+ext, []byte(got))
		}
	}
}

// genMarkdown builds random Markdown from fragments that stress the
// converter: unbalanced markers, HTML, entities, fences, tables, lists.
func genMarkdown(r *rand.Rand) string {
	frags := []string{"**", "*", "_", "__", "~~", "`", "```", "```go\n", "\n```\n", "<b>", "</i>", "&", "&amp;", "&#1234;", "<",
		">", "\"", "[", "](", ")", "https://x.y/?a=1&b=2", "# ", "\n- ", "\n1. ", "\n> ", "| a | b |\n|---|---|\n| 1 | 2 |\n",
		"\n\n", "\n", " ", "word", "日本", "🙂", "\\", "![i](", "<https://a.b>", "---\n", "    code\n", "- [ ] "}
	var b strings.Builder
	for range 1 + r.IntN(60) {
		b.WriteString(frags[r.IntN(len(frags))])
	}
	return b.String()
}

func checkRendered(t *testing.T, md string) {
	t.Helper()
	html := ToHTML(md)
	if _, err := telegramfake.ParseHTML(html); err != nil {
		t.Fatalf("Telegram would refuse ToHTML(%q) = %q: %v", md, html, err)
	}
	plain := ToPlain(md)
	// Every word of the plain rendering is in the HTML's visible text or,
	// for link targets the plain text spells out, in an href.
	visible, _ := telegramfake.ParseHTML(html)
	raw := stdhtml.UnescapeString(html)
	words := strings.FieldsFunc(plain, func(r rune) bool { return unicode.IsSpace(r) || r == '(' || r == ')' })
	for _, w := range words {
		if !strings.Contains(visible, w) && !strings.Contains(raw, w) {
			t.Fatalf("plain word %q missing from the HTML rendering of %q:\nhtml %q\nplain %q", w, md, html, plain)
		}
	}
}

func TestHTMLProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 5000 {
		checkRendered(t, genMarkdown(r))
	}
}

func FuzzToHTML(f *testing.F) {
	src, _ := os.ReadFile("testdata/kitchen-sink.md")
	f.Add(string(src))
	f.Add("**unclosed `code [link](http://x")
	f.Add("<b>&amp;&nosuch;</b>")
	f.Add("| a |\n|---|\n| <x> |")
	f.Add("> > > deep\n> quote")
	f.Fuzz(func(t *testing.T, md string) {
		if len(md) > 1<<14 {
			t.Skip()
		}
		checkRendered(t, md)
	})
}

// TestRendererChunksAreValid splits long answers and checks every chunk
// parses and fits Telegram's limit after parsing and before.
func TestRendererChunksAreValid(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rend := NewRenderer()
	for i := range 40 {
		var b strings.Builder
		for b.Len() < 9000+i*500 {
			b.WriteString(genMarkdown(r))
			b.WriteString("\n\n```go\n" + strings.Repeat("fmt.Println(\"<x> & y\")\n", r.IntN(80)) + "```\n\n")
		}
		for j, c := range rend.RenderChunks(b.String()) {
			if n := UTF16Len(c.Text); n > MaxMessageLen {
				t.Fatalf("answer %d chunk %d: %d UTF-16 units > %d", i, j, n, MaxMessageLen)
			}
			if n := UTF16Len(c.Plain); n > MaxMessageLen {
				t.Fatalf("answer %d chunk %d plain: %d units", i, j, n)
			}
			if _, err := telegramfake.ParseHTML(c.Text); err != nil {
				t.Fatalf("answer %d chunk %d refused: %v\n%s", i, j, err, c.Text)
			}
		}
	}
}

func BenchmarkToHTML(b *testing.B) {
	src, _ := os.ReadFile("testdata/kitchen-sink.md")
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		ToHTML(string(src))
	}
}

// BenchmarkRenderChunks9000 renders and splits a 9,000-character answer
// with code blocks, the whole path of one long final message.
func BenchmarkRenderChunks9000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var sb strings.Builder
	for sb.Len() < 9000 {
		sb.WriteString("Some **text** with `code` and a [link](https://go.dev).\n\n")
		sb.WriteString("```go\n" + strings.Repeat("x := y < z && ok\n", 10+r.IntN(20)) + "```\n\n")
	}
	md := sb.String()
	rend := NewRenderer()
	b.SetBytes(int64(len(md)))
	b.ReportAllocs()
	for b.Loop() {
		rend.RenderChunks(md)
	}
}

func TestValidLang(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"c++", true},
		{"objective-c.m#_", true},
		{"a b", false},
		{`"><b>`, false},
	}
	for _, tt := range tests {
		if got := validLang(tt.in); got != tt.want {
			t.Errorf("validLang(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestPlainLineRendersAsGoldmark holds the shortcut for plain lines to what
// goldmark renders for them, in HTML and in plain text, on chosen lines and
// on random ones drawn from every printable ASCII character and some others.
func TestPlainLineRendersAsGoldmark(t *testing.T) {
	check := func(s string) bool {
		if !plainLine(s) {
			return false
		}
		for _, html := range []bool{true, false} {
			if got, want := render(s, html), renderMarkdown(s, html); got != want {
				t.Errorf("render(%q, html=%v) = %q, goldmark renders %q", s, html, got, want)
			}
		}
		return true
	}
	for _, s := range []string{
		"Noted, I will keep that in mind. Anything else you want me to look at today?",
		"Note: a well-known trick (see above) works 100% of the time.",
		`He said "hi" and left; it's 5 o'clock, x=1, y={2}, a^b, $5, 50/50.`,
		"Привет, мир 👋 — 日本語も大丈夫です。",
		"end with a colon:", "a.b.c", "(just parentheses)", "e.g. this, i.e. that",
	} {
		if !check(s) {
			t.Errorf("%q does not take the shortcut", s)
		}
	}
	for _, s := range []string{
		"", " lead", "trail ", "two\nlines", "*em*", "_em_", "`code`", "[l](u)", "![i](u)", "<b>", "a & b",
		"~~s~~", "a | b", "# h", "- item", "+ item", "1. item", "2) item", "---", "=", "see https://x.org",
		"www.example.com", "WWW.example.com", "mail me@x.org", "a\\*b", "tab\there", "bad \xff utf-8",
	} {
		if plainLine(s) {
			t.Errorf("%q takes the shortcut", s)
		}
	}
	alphabet := []rune(" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~éß€日👋\u00a0\u2003")
	rng := rand.New(rand.NewPCG(16, 2026))
	taken := 0
	for range 30000 {
		r := make([]rune, 1+rng.IntN(30))
		for i := range r {
			if rng.IntN(3) == 0 {
				r[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				r[i] = rune('a' + rng.IntN(26)) // mostly letters, as replies are
			}
		}
		if check(string(r)) {
			taken++
		}
	}
	if taken < 1000 {
		t.Fatalf("only %d of the random lines took the shortcut: the comparison proves little", taken)
	}
}
