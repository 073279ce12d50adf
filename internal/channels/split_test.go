package channels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func runeLen(s string) int { return utf8.RuneCountInString(s) }

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// escapedLen measures like an HTML platform: escaping grows & < > " by a few units.
func escapedLen(s string) int {
	n := utf16Len(s)
	n += 4 * strings.Count(s, "&")
	n += 3 * (strings.Count(s, "<") + strings.Count(s, ">"))
	n += 5 * strings.Count(s, `"`)
	return n
}

func TestSplitExamples(t *testing.T) {
	para := strings.Repeat("word ", 15) // 75 bytes
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"fits", "hello world", 100, []string{"hello world"}},
		{"empty", "  \n ", 10, nil},
		{"paragraphs", "aaaa aaaa\n\nbbbb bbbb\n\ncccc", 20, []string{"aaaa aaaa\n\nbbbb bbbb", "cccc"}},
		{"lines", "aaaa aaaa\nbbbb bbbb\ncccc", 12, []string{"aaaa aaaa", "bbbb bbbb", "cccc"}},
		{"spaces", "aaa bbb ccc ddd", 8, []string{"aaa bbb", "ccc ddd"}},
		{"hard", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"hard utf8", "ééééé", 2, []string{"éé", "éé", "é"}},
		{"fence reopened", "```go\nline1\nline2\nline3\n```", 22,
			[]string{"```go\nline1\nline2\n```", "```go\nline3\n```"}},
		{"paragraph preferred over later line", para + "\n\n" + para, 100, []string{strings.TrimSpace(para), para}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.in, tt.limit, runeLen)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Fatalf("Split(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
		})
	}
}

// genMarkdown builds Markdown-like text from a seeded source: words with
// multi-byte runes and HTML-special characters, line and paragraph breaks,
// long unbroken words and fenced code blocks with languages.
func genMarkdown(r *rand.Rand) string {
	words := []string{"alpha", "beta", "γάμμα", "日本語", "🙂👍", "a&b", "<tag>", `"q"`, "**bold**", "_it_", "`code`", "x", "-", "1."}
	langs := []string{"", "go", "python", "c++"}
	var b strings.Builder
	blocks := 1 + r.IntN(12)
	for range blocks {
		switch r.IntN(5) {
		case 0: // fenced code block
			fc := "```"
			if r.IntN(4) == 0 {
				fc = "~~~~"
			}
			b.WriteString(fc + langs[r.IntN(len(langs))] + "\n")
			for range 1 + r.IntN(15) {
				b.WriteString(strings.Repeat(" ", r.IntN(5)))
				for range r.IntN(12) {
					b.WriteString(words[r.IntN(len(words))] + " ")
				}
				b.WriteString("\n")
			}
			b.WriteString(fc + "\n\n")
		case 1: // a long unbroken word
			b.WriteString(strings.Repeat("z", 20+r.IntN(300)) + "\n\n")
		default: // a paragraph of lines
			for range 1 + r.IntN(5) {
				for range 1 + r.IntN(30) {
					b.WriteString(words[r.IntN(len(words))])
					if r.IntN(8) == 0 {
						b.WriteString("  ")
					} else {
						b.WriteString(" ")
					}
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// checkPieces asserts the chunker's contract on one input.
func checkPieces(t *testing.T, md string, limit int, measure func(string) int) {
	t.Helper()
	pieces := splitPieces(md, limit, measure)
	inputBalanced := scanOpen(md) == nil
	pos := 0
	for i, p := range pieces {
		text := p.text()
		if n := measure(text); n > limit {
			t.Fatalf("chunk %d measures %d > limit %d:\n%s", i, n, limit, text)
		}
		if !utf8.ValidString(text) {
			t.Fatalf("chunk %d is not valid UTF-8: %q", i, text)
		}
		if (i < len(pieces)-1 || inputBalanced) && scanOpen(text) != nil {
			t.Fatalf("chunk %d leaves a fence open:\n%s", i, text)
		}
		if p.reopen != "" && scanFences(md).openerAt(p.start) != p.reopen {
			t.Fatalf("chunk %d reopens %q, which is not the fence open at its start", i, p.reopen)
		}
		if md[p.start:p.start+len(p.body)] != p.body {
			t.Fatalf("chunk %d body is not the input at its offset", i)
		}
		if gap := md[pos:p.start]; strings.TrimSpace(gap) != "" || p.start < pos {
			t.Fatalf("text lost before chunk %d: %q", i, gap)
		}
		pos = p.start + len(p.body)
	}
	if tail := md[pos:]; strings.TrimSpace(tail) != "" {
		t.Fatalf("text lost at the end: %q", tail)
	}
}

// scanOpen returns the fence still open at the end of s.
func scanOpen(s string) *fence {
	d := scanFences(s)
	last := d.lines[len(d.lines)-1]
	text := s[last.start:last.end]
	if last.open == nil {
		return parseOpener(text)
	}
	if isCloser(text, last.open) {
		return nil
	}
	return last.open
}

func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	measures := map[string]func(string) int{"runes": runeLen, "utf16": utf16Len, "escaped": escapedLen}
	for i := range 3000 {
		md := genMarkdown(r)
		limit := 40 + r.IntN(400)
		for name, m := range measures {
			t.Run(fmt.Sprintf("%d/%s", i, name), func(t *testing.T) { checkPieces(t, md, limit, m) })
		}
		if t.Failed() {
			t.Fatalf("seed case %d failed; input:\n%s", i, md)
		}
	}
}

// FuzzSplit checks the contract on arbitrary input. The limit is kept above
// what one reopened fence plus a rune needs.
func FuzzSplit(f *testing.F) {
	f.Add("hello world\n\nsecond paragraph", 10)
	f.Add("```go\nfunc main() {\n\tprintln(\"hi\")\n}\n```\n", 20)
	f.Add("~~~~\nunclosed fence with a long line of text\n", 12)
	f.Add("a\r\nb\r\n\r\nc", 2)
	f.Add(strings.Repeat("日本語 ", 50), 7)
	f.Add("  ```\nindented opener\n  ```\n````\n```\nnested\n```\n````", 9)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if !utf8.ValidString(md) || len(md) > 1<<14 {
			t.Skip()
		}
		longest := 0
		for l := range strings.SplitSeq(md, "\n") {
			if parseOpener(l) != nil {
				longest = max(longest, runeLen(l))
			}
		}
		if limit < 0 {
			limit = -limit
		}
		limit = 2*longest + 8 + limit%500
		checkPieces(t, md, limit, runeLen)
	})
}

func BenchmarkSplit(b *testing.B) {
	md := genMarkdown(rand.New(rand.NewPCG(3, 4)))
	for len(md) < 9000 {
		md += genMarkdown(rand.New(rand.NewPCG(uint64(len(md)), 4)))
	}
	b.SetBytes(int64(len(md)))
	b.ReportAllocs()
	for b.Loop() {
		Split(md, 4096, escapedLen)
	}
}
