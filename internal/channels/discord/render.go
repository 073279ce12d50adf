package discord

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Discord's limits on one message.
const (
	// MaxMessageRunes is Discord's content limit (2000 characters).
	MaxMessageRunes = 2000
	// DefaultMaxLines is the soft line cap per message: a taller message is
	// split at a line boundary, since Discord shows it as a wall the reader
	// must scroll past.
	DefaultMaxLines = 40
)

// NewRenderer returns the renderer to register with the channel manager.
// Discord speaks Markdown, so the agent's text passes through, except for
// what Discord does not render: tables become code blocks (columns stay
// aligned) and #### headings or deeper become bold lines. Chunks are cut
// with the shared Split under 2000 characters and maxLines lines (0: the
// default), code fences closed and reopened.
func NewRenderer(maxLines int) channels.MarkupRenderer {
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	return channels.MarkupRenderer{
		Limit: MaxMessageRunes,
		// Lines beyond the cap count as "too long", so Split cuts at a line
		// break before the character limit forces it.
		Measure: func(s string) int {
			if strings.Count(s, "\n")+1 > maxLines {
				return MaxMessageRunes + 1
			}
			return utf8.RuneCountInString(s)
		},
		Markup: ToDiscord,
		Plain:  ToDiscord, // Discord never refuses markup; there is no plain fallback
	}
}

// tableSep and deepHeading are compiled on the first reply rather than at
// start: a daemon that has not replied yet does not hold their programs
// (size: docs/BENCHMARKS.md#figures-behind-code-choices).
var (
	tableSep = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)
	})
	deepHeading = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#{4,6}\s+(.+?)\s*#*\s*$`) })
)

// ToDiscord adapts the agent's Markdown to Discord's dialect. Text inside
// code fences is left alone.
func ToDiscord(md string) string {
	if !strings.Contains(md, "|") && !strings.Contains(md, "####") {
		return md // nothing to adapt; Split calls this for every candidate cut
	}
	lines := strings.Split(md, "\n")
	out := make([]string, 0, len(lines))
	var fence string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			out = append(out, l)
			continue
		}
		if f := fenceOpener(t); f != "" {
			fence = f
			out = append(out, l)
			continue
		}
		if n := tableLen(lines[i:]); n > 0 {
			out = append(out, "```")
			out = append(out, lines[i:i+n]...)
			out = append(out, "```")
			i += n - 1
			continue
		}
		if m := deepHeading().FindStringSubmatch(t); m != nil {
			l = "**" + m[1] + "**"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// fenceOpener returns the fence (``` or ~~~, possibly longer) a line opens.
func fenceOpener(t string) string {
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// tableLen returns how many lines starting at lines[0] form a GFM table
// (header, separator, rows), or 0.
func tableLen(lines []string) int {
	if len(lines) < 2 || !strings.Contains(lines[0], "|") || !tableSep().MatchString(lines[1]) {
		return 0
	}
	n := 2
	for n < len(lines) && strings.Contains(lines[n], "|") && strings.TrimSpace(lines[n]) != "" {
		n++
	}
	return n
}
