package channels

import "strings"

// MarkupRenderer is a Renderer (and ChunkRenderer) built from a platform's
// conversion functions, so every adapter splits the same way: the Markdown
// is cut with Split, measuring each candidate after conversion, and each
// piece is converted on its own.
type MarkupRenderer struct {
	// Limit is the platform's maximum message length in Measure units.
	Limit int
	// Measure counts what the platform counts (UTF-16 units, runes...).
	Measure func(string) int
	// Markup converts Markdown to the platform's markup.
	Markup func(markdown string) string
	// Plain converts Markdown to readable plain text.
	Plain func(markdown string) string
}

var (
	_ Renderer      = MarkupRenderer{}
	_ ChunkRenderer = MarkupRenderer{}
)

// RenderChunks splits markdown so that both renderings of each piece fit.
func (r MarkupRenderer) RenderChunks(markdown string) []Chunk {
	fits := func(md string) int {
		return max(r.Measure(r.Markup(md)), r.Measure(r.Plain(md)))
	}
	pieces := Split(markdown, r.Limit, fits)
	out := make([]Chunk, 0, len(pieces))
	for _, p := range pieces {
		c := Chunk{Text: r.Markup(p), Plain: r.Plain(p)}
		if strings.TrimSpace(c.Plain) == "" && strings.TrimSpace(c.Text) == "" {
			continue
		}
		if strings.TrimSpace(c.Plain) == "" {
			c.Plain = p
		}
		out = append(out, c)
	}
	return out
}

// Render returns the markup chunks.
func (r MarkupRenderer) Render(markdown string) []string {
	chunks := r.RenderChunks(markdown)
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = c.Text
	}
	return out
}

// RenderPlain returns plain-text chunks, split for the plain rendering only.
func (r MarkupRenderer) RenderPlain(markdown string) []string {
	pieces := Split(markdown, r.Limit, func(md string) int { return r.Measure(r.Plain(md)) })
	out := make([]string, 0, len(pieces))
	for _, p := range pieces {
		if s := r.Plain(p); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}
