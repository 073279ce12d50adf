package history

import (
	"sync"
	"unsafe"
)

// Texts is a loaded session's memo for its projections (the agent keeps it
// in the session's Snapshot.Memo): EstimateText of the stored messages'
// texts, by identity — the address and length of a string's bytes — and
// the state of the last walk of the session's model calls (see
// Texts.Project). A stored message's text never changes and stays at one
// address while the session holds it, so a walk pays a map lookup per text
// instead of scanning it again.
//
// Only the texts of stored turns that are complete are added (Texts.Project
// adds them, Project never does): a text enters the cache when it comes
// back, stored, in a later turn (the store keeps a plain message's texts as
// the turn had them, and decodes a copy of any other), and a turn that is
// never stored leaves nothing behind. A Texts belongs with one loaded copy
// of a session, so it never keeps texts alive past the messages that hold
// them.
//
// A key holds a pointer to the bytes, which keeps them alive while the
// entry is in the cache, so an address cannot be reused by another string
// with a stale count. Entries live in two generations of up to textsLimit
// bytes each. The zero value is ready; a nil *Texts estimates without
// caching. It is safe for concurrent use.
type Texts struct {
	mu       sync.Mutex
	cur, old map[textKey]int32
	bytes    int // of the texts in cur
	limit    int // textsLimit unless a test sets it
	// cp is where Texts.Project resumes its walk of the session.
	cp *checkpoint
}

type textKey struct {
	p *byte
	n int
}

// textsLimit bounds each generation by the bytes of its texts: a window of
// 128k tokens is about 0.5 MB of text.
const textsLimit = 1 << 20

// textsMin is the shortest text worth a lookup: a shorter one is estimated
// about as fast as it is hashed.
const textsMin = 64

// text returns EstimateText(s), from the cache when s is in it; add puts
// it there when it is not.
func (c *Texts) text(s string, add bool) int {
	if c == nil || len(s) < textsMin {
		return EstimateText(s)
	}
	k := textKey{unsafeData(s), len(s)}
	c.mu.Lock()
	if n, ok := c.cur[k]; ok {
		c.mu.Unlock()
		return int(n)
	}
	n, ok := c.old[k]
	c.mu.Unlock()
	if !ok {
		n = int32(EstimateText(s))
		if !add {
			return int(n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		c.cur = make(map[textKey]int32)
	}
	limit := c.limit
	if limit <= 0 {
		limit = textsLimit
	}
	if c.bytes+len(s) > limit {
		c.old, c.cur, c.bytes = c.cur, make(map[textKey]int32, len(c.cur)), 0
	}
	c.cur[k] = n
	c.bytes += len(s)
	return int(n)
}

// unsafeData is the address of s's bytes: the identity of a stored text.
func unsafeData(s string) *byte { return unsafe.StringData(s) }

// texter estimates texts through a cache that it may add to.
type texter struct {
	c   *Texts
	add bool
}

func (t texter) text(s string) int { return t.c.text(s, t.add) }
