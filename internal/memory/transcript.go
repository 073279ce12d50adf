package memory

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// stampLayout is the HISTORY.md timestamp, "[2006-01-02 15:04]"
// (docs/memory.md).
const stampLayout = "2006-01-02 15:04"

// maxArgChars bounds the tool-call arguments quoted in a transcript.
const maxArgChars = 300

// transcriptOptions say how much of the messages a transcript shows.
type transcriptOptions struct {
	// level is the rendering of tool results (Summary for the model, which
	// needs what a tool found but not its full output).
	level llm.Level
	// maxText cuts longer texts in the middle; 0 keeps them whole.
	maxText int
	loc     *time.Location
}

// transcript renders messages as readable, grep-able lines, one message per
// line ("[2025-03-14 09:30] user: ..."), continuation lines indented and
// blank lines dropped, so the result is one paragraph.
func transcript(msgs []llm.Message, opt transcriptOptions) string {
	var b strings.Builder
	line := func(t time.Time, head, text string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if !t.IsZero() {
			b.WriteString("[" + t.In(opt.loc).Format(stampLayout) + "] ")
		}
		b.WriteString(head)
		if text != "" {
			b.WriteString(": ")
			writeIndented(&b, cut(text, opt.maxText))
		}
	}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleTool:
			for _, r := range m.ToolResults() {
				head := r.Name + " result"
				if r.IsError {
					head = r.Name + " failed"
				}
				line(m.Time, head, r.Content.At(opt.level))
			}
		default:
			var text []string
			var calls []string
			for _, p := range m.Parts {
				switch p.Kind {
				case llm.PartText:
					if s := strings.TrimSpace(p.Text); s != "" {
						text = append(text, s)
					}
				case llm.PartImage:
					text = append(text, "[image"+imageWhere(p.Image)+"]")
				case llm.PartFileRef:
					text = append(text, "[file: "+p.File.Path+"]")
				case llm.PartToolCall:
					args := string(p.Call.Arguments)
					if p.Call.ParseError != "" {
						args = p.Call.RawArgs
					}
					calls = append(calls, p.Call.Name+" "+cut(args, maxArgChars))
				}
			}
			if len(text) > 0 {
				line(m.Time, string(m.Role), strings.Join(text, "\n"))
			}
			for _, c := range calls {
				line(m.Time, string(m.Role)+" called", c)
			}
		}
	}
	return b.String()
}

func imageWhere(img *llm.Image) string {
	switch {
	case img == nil:
		return ""
	case img.Path != "":
		return ": " + img.Path
	case img.URL != "":
		return ": " + img.URL
	}
	return ""
}

// writeIndented writes text with its lines after the first indented by two
// spaces and its blank lines left out.
func writeIndented(b *strings.Builder, text string) {
	first := true
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, " \t\r\n")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if !first {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
		first = false
	}
}

// cut keeps the head and tail of a text longer than n characters around a
// marker saying how much was left out; n ≤ 0 keeps everything.
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	head, tail := n*2/3, n/3
	return string(r[:head]) + fmt.Sprintf(" […%d characters left out…] ", len(r)-head-tail) + string(r[len(r)-tail:])
}

// span returns the times of the first and last timed message.
func span(msgs []llm.Message) (first, last time.Time) {
	for _, m := range msgs {
		if m.Time.IsZero() {
			continue
		}
		if first.IsZero() {
			first = m.Time
		}
		last = m.Time
	}
	return first, last
}
