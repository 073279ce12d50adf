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
// Pieces are measured by their markup, which for the usual converters is
// never shorter than the plain twin; a piece whose plain twin still
// overflows is split again measuring both.
func (r MarkupRenderer) RenderChunks(markdown string) []Chunk {
	both := func(md string) int { return max(r.Measure(r.Markup(md)), r.Measure(r.Plain(md))) }
	var out []Chunk
	for _, p := range Split(markdown, r.Limit, func(md string) int { return r.Measure(r.Markup(md)) }) {
		c := Chunk{Text: r.Markup(p), Plain: r.Plain(p)}
		if r.Measure(c.Plain) > r.Limit {
			for _, q := range Split(p, r.Limit, both) {
				out = appendChunk(out, Chunk{Text: r.Markup(q), Plain: r.Plain(q)}, q)
			}
			continue
		}
		out = appendChunk(out, c, p)
	}
	return out
}

func appendChunk(out []Chunk, c Chunk, md string) []Chunk {
	if strings.TrimSpace(c.Plain) == "" && strings.TrimSpace(c.Text) == "" {
		return out
	}
	if strings.TrimSpace(c.Plain) == "" {
		c.Plain = md
	}
	return append(out, c)
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
