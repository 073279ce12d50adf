package channels

import (
	"strings"
	"unicode/utf8"
)

// Split cuts the Markdown text md into chunks whose measure is at most limit,
// for platforms that cap a message's length. measure is applied to a chunk's
// Markdown and should measure what the platform counts, typically the chunk
// after rendering and escaping; because every chunk is rendered on its own, a
// cut can never land inside an HTML entity or tag of the rendered form.
//
// Cuts prefer, in order, paragraph breaks, line breaks and spaces, and fall
// back to a hard cut at a rune boundary only when a chunk has none of them in
// its upper half. A fenced code block that must be cut is closed at the end of
// one chunk and reopened, with its info string, at the start of the next, so
// every chunk renders as valid Markdown. Whitespace at the cut points is
// dropped; nothing else is.
//
// measure must grow (roughly) with its input. If the limit is so small that
// not even one character plus a reopened fence fits, that chunk is emitted
// over the limit rather than looping forever.
func Split(md string, limit int, measure func(string) int) []string {
	pieces := splitPieces(md, limit, measure)
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = p.text()
	}
	return out
}

// piece is one chunk: a substring of the input, optionally preceded by a
// reopened fence line and followed by an added fence closer.
type piece struct {
	reopen string
	body   string
	start  int // offset of body in the input
	close  string
}

func (p piece) text() string {
	var b strings.Builder
	b.Grow(len(p.reopen) + len(p.body) + len(p.close) + 2)
	if p.reopen != "" {
		b.WriteString(p.reopen)
		b.WriteByte('\n')
	}
	b.WriteString(p.body)
	if p.close != "" {
		b.WriteByte('\n')
		b.WriteString(p.close)
	}
	return b.String()
}

// cut classes, best first.
const (
	cutParagraph = iota
	cutLine
	cutSpace
	cutHard
)

func splitPieces(md string, limit int, measure func(string) int) []piece {
	if strings.TrimSpace(md) == "" {
		return nil
	}
	if measure(md) <= limit {
		return []piece{{body: md}}
	}
	doc := scanFences(md)
	var out []piece
	start := 0
	for start < len(md) {
		reopen := doc.openerAt(start)
		whole := doc.piece(md, reopen, start, len(md))
		if measure(whole.text()) <= limit {
			if strings.TrimSpace(whole.body) != "" {
				out = append(out, whole)
			}
			break
		}
		end, class := doc.chooseCut(md, reopen, start, limit, measure)
		p := doc.piece(md, reopen, start, end)
		if strings.TrimSpace(p.body) != "" {
			out = append(out, p)
		}
		start = doc.skipAfterCut(md, end, class)
	}
	return out
}

// fence is an open fenced code block.
type fence struct {
	opener string // the opening line as written, without its newline
	char   byte
	n      int
}

func (f *fence) closer() string { return strings.Repeat(string(f.char), f.n) }

// line is one input line (end excludes the newline) and the fence that is
// open at its start.
type line struct {
	start, end int
	open       *fence // fence open before this line, nil outside code
	delim      bool   // the line opens or closes a fence
	blank      bool
}

type fenceDoc struct {
	lines []line
}

func scanFences(md string) fenceDoc {
	var d fenceDoc
	var open *fence
	for start := 0; start <= len(md); {
		end := strings.IndexByte(md[start:], '\n')
		if end < 0 {
			end = len(md)
		} else {
			end += start
		}
		text := md[start:end]
		l := line{start: start, end: end, open: open, blank: strings.TrimSpace(text) == ""}
		if open == nil {
			if f := parseOpener(text); f != nil {
				l.delim = true
				open = f
			}
		} else if isCloser(text, open) {
			l.delim = true
			open = nil
		}
		d.lines = append(d.lines, l)
		if end == len(md) {
			break
		}
		start = end + 1
	}
	return d
}

// parseOpener recognises a CommonMark fence opener: up to three spaces, three
// or more backticks or tildes, and an info string (without backticks for a
// backtick fence).
func parseOpener(text string) *fence {
	t := strings.TrimRight(text, " \t\r")
	indent := len(t) - len(strings.TrimLeft(t, " "))
	if indent > 3 {
		return nil
	}
	t = t[indent:]
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return nil
	}
	c := t[0]
	n := 0
	for n < len(t) && t[n] == c {
		n++
	}
	if n < 3 {
		return nil
	}
	if c == '`' && strings.IndexByte(t[n:], '`') >= 0 {
		return nil
	}
	return &fence{opener: strings.TrimRight(text, " \t\r"), char: c, n: n}
}

func isCloser(text string, f *fence) bool {
	t := strings.TrimRight(text, " \t\r")
	indent := len(t) - len(strings.TrimLeft(t, " "))
	if indent > 3 {
		return false
	}
	t = t[indent:]
	if len(t) < f.n {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != f.char {
			return false
		}
	}
	return true
}

// lineAt returns the index of the line containing offset p (a line's
// newline belongs to it).
func (d fenceDoc) lineAt(p int) int {
	lo, hi := 0, len(d.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if d.lines[mid].start <= p {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// fenceAt returns the fence open at offset p, which must not lie strictly
// inside a delimiter line.
func (d fenceDoc) fenceAt(p int) *fence {
	return d.lines[d.lineAt(p)].open
}

// openerAt is the fence line to reopen when a chunk starts at p.
func (d fenceDoc) openerAt(p int) string {
	if f := d.fenceAt(p); f != nil {
		return f.opener
	}
	return ""
}

// allowed reports whether a chunk may end at p: never strictly inside a
// fence delimiter line, never where the rest of the line would read as a
// fence line, never between \r and \n, never inside a rune.
func (d fenceDoc) allowed(md string, p int) bool {
	if p >= len(md) {
		return true
	}
	if !utf8.RuneStart(md[p]) {
		return false
	}
	if p > 0 && md[p-1] == '\r' && md[p] == '\n' {
		return false
	}
	l := d.lines[d.lineAt(p)]
	if l.delim && p > l.start && p <= l.end {
		return false
	}
	if p > l.start && p < l.end {
		// The rest of a cut line starts the next chunk's line: it must not
		// turn into a fence opener (or close the reopened fence) there.
		rest := strings.TrimLeft(md[p:l.end], " \t")
		if l.open == nil && parseOpener(rest) != nil || l.open != nil && isCloser(rest, l.open) {
			return false
		}
	}
	return true
}

// piece builds the chunk [start,end) with the fence bookkeeping.
func (d fenceDoc) piece(md, reopen string, start, end int) piece {
	body := md[start:end]
	p := piece{reopen: reopen, start: start}
	if end < len(md) {
		body = strings.TrimRight(body, " \t\r\n")
		if f := d.fenceAt(end); f != nil {
			p.close = f.closer()
		}
	}
	p.body = body
	return p
}

// skipAfterCut returns where the next chunk starts: the whitespace at the
// cut is dropped, except indentation inside a code block.
func (d fenceDoc) skipAfterCut(md string, end, class int) int {
	inCode := d.fenceAt(end) != nil
	p := end
	for p < len(md) {
		c := md[p]
		if c == '\n' || c == '\r' || (!inCode && (c == ' ' || c == '\t')) ||
			(class == cutSpace && (c == ' ' || c == '\t')) {
			p++
			continue
		}
		break
	}
	// Skipping must not land strictly inside a delimiter line; it cannot,
	// because it only moves over whitespace and delimiters start with a
	// fence character after at most three spaces, and those spaces are kept
	// in code only. Outside code, skipped indentation before an opener is
	// harmless: the opener still starts the line.
	return p
}

// chooseCut picks where the chunk starting at start ends.
func (d fenceDoc) chooseCut(md, reopen string, start, limit int, measure func(string) int) (int, int) {
	fits := func(end int) bool {
		return measure(d.piece(md, reopen, start, end).text()) <= limit
	}
	// The furthest allowed end that fits, by binary search over offsets.
	lo, hi := start, len(md) // fits(lo) is treated as true, fits(hi) is false
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		q := mid
		for q > lo && !d.allowed(md, q) {
			q--
		}
		if q == lo {
			// No allowed offset in (lo, mid]; look above mid.
			q = mid
			for q < hi && !d.allowed(md, q) {
				q++
			}
			if q == hi {
				break
			}
		}
		if fits(q) {
			lo = q
		} else {
			hi = q
		}
	}
	maxFit := lo
	if maxFit == start {
		// Not even one rune fits: emit one rune (or the rest of a delimiter
		// line) over the limit so the loop always progresses.
		q := start + 1
		for q < len(md) && !d.allowed(md, q) {
			q++
		}
		return q, cutHard
	}
	half := start + (maxFit-start)/2
	for class := cutParagraph; class <= cutSpace; class++ {
		if p, ok := d.lastBoundary(md, class, start, maxFit, half, fits); ok {
			return p, class
		}
	}
	for class := cutParagraph; class <= cutSpace; class++ {
		if p, ok := d.lastBoundary(md, class, start, maxFit, start+1, fits); ok {
			return p, class
		}
	}
	return maxFit, cutHard
}

// lastBoundary finds the last boundary of class in [from, maxFit] that fits.
func (d fenceDoc) lastBoundary(md string, class, start, maxFit, from int, fits func(int) bool) (int, bool) {
	if from <= start {
		from = start + 1
	}
	tries := 0
	for p := maxFit; p >= from; p-- {
		if !d.isBoundary(md, class, p) {
			continue
		}
		if fits(p) {
			return p, true
		}
		// measure is nearly monotone; if a few earlier boundaries do not fit
		// either, give up on this class rather than scan the whole chunk.
		if tries++; tries > 8 {
			return 0, false
		}
	}
	return 0, false
}

// isBoundary reports whether a chunk may end at p with a cut of class.
func (d fenceDoc) isBoundary(md string, class, p int) bool {
	if p <= 0 || p >= len(md) || !d.allowed(md, p) {
		return false
	}
	switch class {
	case cutParagraph:
		// p starts a line that follows a blank line, outside code.
		if md[p-1] != '\n' {
			return false
		}
		i := d.lineAt(p)
		return i > 0 && d.lines[i].open == nil && d.lines[i-1].blank && d.lines[i-1].open == nil
	case cutLine:
		return md[p-1] == '\n'
	case cutSpace:
		return md[p-1] == ' ' || md[p-1] == '\t'
	}
	return false
}
