package history

import (
	"slices"
	"unsafe"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// checkpoint is the replay's state as it entered a turn of a loaded
// session, so that the next call resumes there instead of walking the
// session again from its consolidation offset (see Texts.Project).
type checkpoint struct {
	// origin identifies the stored messages: their first message, the
	// first turn still sent (cut) and the turn the state was taken at.
	origin, cutAt, turnAt *llm.Part
	// cutIdx and turnIdx are those turns' user messages' indexes in the
	// stored messages; turn is the turn's number.
	cutIdx, turnIdx, turn int
	// hi and lo are the limits the state was computed for.
	hi, lo int
	st     state
	old    int
}

// identity is what identifies a stored message while its session is
// loaded: the address of its parts. A stored message never changes and
// keeps its parts, and the checkpoint's pointer keeps them alive, so an
// address is never reused by another message while it is remembered.
func identity(m *llm.Message) *llm.Part { return unsafe.SliceData(m.Parts) }

// Project is the package's Project of stored followed by turn, resuming
// from the state c remembers for stored (a loaded session's messages since
// its consolidation offset, which only grow while it is loaded) and
// remembering the state as it enters stored's last user turn. A turn's
// model calls then cost the walk of that turn and the rendering of what is
// sent, not a walk of the whole session. The View is Project's.
func (c *Texts) Project(system string, stored, turn []llm.Message, opt Options) View {
	sys := opt.systemTokens(system)
	if c == nil {
		turns := splitTurns(stored, turn)
		v := newReplay(nil, turns, 0, opt, sys).run(system, sys, 0)
		if len(turns) == 0 {
			v.Omitted = len(stored) + len(turn)
		}
		return v
	}
	hi, lo := opt.limits(sys)
	c.mu.Lock()
	cp := c.cp
	c.mu.Unlock()
	from, base := 0, 0
	valid := cp != nil && len(stored) > cp.turnIdx && cp.hi == hi && cp.lo == lo &&
		identity(&stored[0]) == cp.origin && identity(&stored[cp.cutIdx]) == cp.cutAt && identity(&stored[cp.turnIdx]) == cp.turnAt
	if valid {
		from, base = cp.cutIdx, cp.st.cut
	}
	turns := splitTurns(stored[from:], turn)
	r := newReplay(c, turns, base, opt, sys)
	if valid {
		r.state = cp.st
		r.state.pinned = slices.Clone(cp.st.pinned)
		r.now, r.old = cp.turn, cp.old
	}
	// The last user message of stored starts the turn the next call
	// resumes at.
	lastStored := -1
	for k := len(turns) - 1; k >= 0; k-- {
		if from+turns[k].orig < len(stored) {
			lastStored = base + k
			break
		}
	}
	r.addBefore = lastStored
	r.onEnter = func(t int) {
		if t != lastStored || (valid && t == cp.turn) {
			return
		}
		next := &checkpoint{
			origin: identity(&stored[0]),
			cutIdx: from + r.turns[r.cut-base].orig, turnIdx: from + r.turns[t-base].orig, turn: t,
			hi: hi, lo: lo, old: r.old, st: r.state,
		}
		next.st.pinned = slices.Clone(r.pinned)
		next.cutAt, next.turnAt = identity(&stored[next.cutIdx]), identity(&stored[next.turnIdx])
		if next.origin == nil || next.cutAt == nil || next.turnAt == nil {
			return // a message without parts has no identity to check
		}
		c.mu.Lock()
		c.cp = next
		c.mu.Unlock()
	}
	v := r.run(system, sys, from)
	if len(turns) == 0 {
		v.Omitted = len(stored) + len(turn)
	}
	return v
}
