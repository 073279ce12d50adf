package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Sizes of the renderings (docs/history.md#levels-of-detail), in bytes. A text
// up to summaryThreshold is its own summary; a longer one keeps its first
// summaryHead and last summaryTail bytes (cut at line breaks where one is
// near) around a marker.
const (
	summaryThreshold = 1500
	summaryHead      = 1000
	summaryTail      = 400
	// gistArgs and gistArgValue bound the arguments a gist quotes.
	gistArgs     = 3
	gistArgValue = 40
	gistPreview  = 80
)

// Detail renders a tool result at the three levels of detail
// (docs/history.md#levels-of-detail), once, when it is stored: Live is the
// result's text as the registry capped it, Summary its head and tail around a
// marker saying how much was cut, and Gist one line naming the tool, its key
// arguments, the outcome and the size:
//
//	read_file(path="notes.md") → ok, 12.3 KB, 340 lines
//
// The result is compacted, so a rendering equal to a fuller one is not
// stored twice (a short result is only Live).
func Detail(call llm.ToolCall, res llm.ToolResult) llm.Content {
	live := res.Content.Live
	c := llm.Content{Live: live, Summary: summarize(live), Gist: toolGist(call, res)}
	if len(c.Gist) >= len(live) && len(res.Images) == 0 {
		c.Gist = live // the gist would say more than the text itself
	}
	if len(c.Summary) >= len(live) {
		c.Summary = live
	}
	return c.Compact()
}

// DetailText renders a large user input (a pasted document) as a summary
// and a one-line gist, for Part.Summary and Part.Gist. Each is "" when it
// would equal s (short texts need no other rendering).
func DetailText(s string) (summary, gist string) {
	if len(s) <= summaryThreshold {
		return "", ""
	}
	return summarize(s), fmt.Sprintf("[long message, %s: %q]", sizeOf(s), preview(s, gistPreview))
}

// summarize keeps the head and tail of s around a marker, or returns s when
// it is short enough.
func summarize(s string) string {
	if len(s) <= summaryThreshold {
		return s
	}
	head := cutBefore(s, summaryHead)
	tail := cutAfter(s, len(s)-summaryTail)
	omitted := s[head:tail]
	var b strings.Builder
	b.Grow(head + len(s) - tail + 80)
	b.WriteString(s[:head])
	if !strings.HasSuffix(s[:head], "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %s lines, %s characters omitted …]\n", thousands(strings.Count(omitted, "\n")), thousands(utf8.RuneCountInString(omitted)))
	b.WriteString(s[tail:])
	return b.String()
}

// cutBefore returns an index ≤ n where s may be cut: just after the last
// line break in the final 40 % of s[:n], else the start of the rune at n.
func cutBefore(s string, n int) int {
	if i := strings.LastIndexByte(s[:n], '\n'); i >= n*3/5 {
		return i + 1
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// cutAfter returns an index ≥ n where s may be cut: just after the first
// line break within half the tail, else the start of the rune at n.
func cutAfter(s string, n int) int {
	if i := strings.IndexByte(s[n:], '\n'); i >= 0 && i < summaryTail/2 && n+i+1 < len(s) {
		return n + i + 1
	}
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return n
}

// toolGist is the one-line rendering of a tool result.
func toolGist(call llm.ToolCall, res llm.ToolResult) string {
	name := res.Name
	if name == "" {
		name = call.Name
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('(')
	b.WriteString(gistArguments(call))
	b.WriteString(") → ")
	live := res.Content.Live
	if res.IsError {
		b.WriteString("error: ")
		b.WriteString(strconv.Quote(preview(live, gistPreview)))
	} else {
		b.WriteString("ok, ")
		b.WriteString(sizeOf(live))
	}
	if n := len(res.Images); n > 0 {
		fmt.Fprintf(&b, ", %d image%s", n, plural(n))
	}
	return b.String()
}

// gistArguments renders the first few arguments of a call as
// key="value" pairs in the order the model wrote them, values clipped.
func gistArguments(call llm.ToolCall) string {
	if call.ParseError != "" {
		return "invalid arguments"
	}
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	var args []string
	for dec.More() && len(args) < gistArgs {
		key, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		args = append(args, fmt.Sprintf("%v=%s", key, argValue(v)))
	}
	if dec.More() {
		args = append(args, "…")
	}
	return strings.Join(args, ", ")
}

func argValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return strconv.Quote(clip(s, gistArgValue))
	}
	switch v[0] {
	case '{':
		return "{…}"
	case '[':
		return "[…]"
	}
	return clip(string(v), gistArgValue)
}

// sizeOf describes a text's size: "12.3 KiB, 340 lines", "42 B, 1 line", "empty".
func sizeOf(s string) string {
	if s == "" {
		return "empty"
	}
	lines := strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
	return fmt.Sprintf("%s, %s line%s", bytesize.Format(int64(len(s))), thousands(lines), plural(lines))
}

// preview is the start of s on one line: whitespace collapsed, clipped to n
// runes.
func preview(s string, n int) string {
	if len(s) > 4*n {
		s = s[:4*n] // enough bytes for n runes; clip repairs a cut rune
	}
	return clip(strings.Join(strings.Fields(s), " "), n)
}

// clip shortens s to n runes, marking the cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return strings.ToValidUTF8(s, "")
	}
	r := []rune(strings.ToValidUTF8(s, ""))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
