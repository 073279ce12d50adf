package llm

// Level is a level of detail at which a stored observation is rendered
// (docs/history.md#levels-of-detail).
type Level uint8

const (
	// Live is the full text.
	Live Level = iota
	// Summary is a shortened rendering, e.g. head and tail with a marker.
	Summary
	// Gist is one line: tool, arguments, outcome, size.
	Gist
)

func (l Level) String() string {
	switch l {
	case Live:
		return "live"
	case Summary:
		return "summary"
	case Gist:
		return "gist"
	}
	return "unknown"
}

// Content is a tool result's text at up to three levels of detail. An empty
// Summary or Gist means the rendering equals the next fuller one, so identical
// renderings are never stored twice.
type Content struct {
	Live    string `json:"live"`
	Summary string `json:"summary,omitempty"`
	Gist    string `json:"gist,omitempty"`
}

// PlainContent is content with only a Live rendering.
func PlainContent(s string) Content { return Content{Live: s} }

// At returns the rendering for level l, falling back to the next fuller one.
func (c Content) At(l Level) string {
	if l >= Gist && c.Gist != "" {
		return c.Gist
	}
	if l >= Summary && c.Summary != "" {
		return c.Summary
	}
	return c.Live
}

// Compact drops renderings that equal a fuller one.
func (c Content) Compact() Content {
	if c.Summary == c.Live {
		c.Summary = ""
	}
	if c.Gist == c.Live || (c.Gist == c.Summary && c.Summary != "") {
		c.Gist = ""
	}
	return c
}
