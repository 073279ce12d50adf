package matrix

import (
	"strings"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// MaxMessageBytes caps one message's Markdown, as measured by
// measure. A Matrix event may be 64 KiB whole, and it carries the text
// twice (body, and formatted_body whose HTML runs longer than the
// Markdown); 12 KiB stays well within that.
const MaxMessageBytes = 12 << 10

// NewRenderer returns the renderer to register with the channel manager.
// The chunks stay Markdown: Send and Edit render each into formatted_body
// HTML and a plain body (send.go), so they are cut with the shared Split,
// code fences closed and reopened.
func NewRenderer() channels.MarkupRenderer {
	same := func(md string) string { return md }
	return channels.MarkupRenderer{Limit: MaxMessageBytes, Measure: measure, Markup: same, Plain: same}
}

// measure counts bytes, and the characters HTML escapes (&lt; and the
// like) as the five bytes they become, so a chunk of them still fits.
func measure(s string) int {
	return len(s) + 4*strings.Count(s, "<") + 4*strings.Count(s, ">") + 4*strings.Count(s, "&") + 5*strings.Count(s, `"`)
}
