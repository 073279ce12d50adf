package history

import (
	"fmt"
	"slices"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Default water marks (docs/history.md#levels-of-detail), as fractions of
// Options.Budget: detail is degraded when a request would exceed the high
// mark, and then, in one step, until it is under the low mark.
const (
	DefaultHighWater = 1.0
	DefaultLowWater  = 0.7
)

// Options bound a projection.
type Options struct {
	// Budget is the number of tokens the system prompt and the messages may
	// use together; 0 or less means no limit.
	Budget int
	// HighWater and LowWater are the water marks as fractions of Budget,
	// 0 < LowWater < HighWater ≤ 1; 0 (or an invalid pair) means the
	// defaults. A request over HighWater × Budget degrades detail, oldest
	// first, until it is under LowWater × Budget (see Project).
	HighWater, LowWater float64
	// SystemTokens, when positive, is EstimateText of the system prompt,
	// which a caller that caches its prompt has already computed; 0 means
	// Project estimates it.
	SystemTokens int
}

func (o Options) systemTokens(system string) int {
	if o.SystemTokens > 0 {
		return o.SystemTokens
	}
	return EstimateText(system)
}

// limits returns the token limits of the messages (the system prompt's
// share taken off) at the high and low marks; hi < 0 means no limit.
func (o Options) limits(sys int) (hi, lo int) {
	if o.Budget <= 0 {
		return -1, -1
	}
	high, low := o.HighWater, o.LowWater
	if !(low > 0 && low < high && high <= 1) {
		high, low = DefaultHighWater, DefaultLowWater
	}
	hi = max(int(high*float64(o.Budget))-sys, 0)
	lo = max(int(low*float64(o.Budget))-sys, 0)
	return hi, lo
}

// View is one projection: the messages to send and their token estimate.
type View struct {
	System string
	// Messages are the messages to send, each a user turn's start or part of
	// it. Messages whose rendering changed are copies: the stored messages
	// are never modified. Tool results hold the chosen rendering in
	// Content.Live (the only one adapters send), user text parts in Text.
	Messages []llm.Message
	// Tokens estimates System plus Messages.
	Tokens int
	// Omitted counts input messages before the first one sent.
	Omitted int
	// Steps counts the degradation steps taken since the start of the
	// input (the consolidation offset): the requests of the session's past
	// that crossed the high mark, and this one if it did. The level of
	// detail of what was sent before changes only when Steps grows.
	Steps int
	// Stepped says this request itself crossed the high mark.
	Stepped bool
	// Levels counts the observations sent (tool results and large user
	// inputs, the messages with renderings to choose from) at each level of
	// detail, indexed by llm.Level, with their tokens: what /context shows.
	Levels [3]LevelCount
}

// LevelCount is how many observations a View sends at one level of
// detail, and their tokens.
type LevelCount struct {
	Messages, Tokens int
}

// Project builds the request history from msgs, the session's entries since
// its consolidation offset in order (possibly followed by the current turn's
// messages), for a model call with system as its system prompt. It repairs
// msgs (see Repair) and renders every observation (tool results and large
// user inputs) at a level of detail, spending detail by budget
// (docs/history.md#levels-of-detail):
//
//   - every observation stays Live while the request fits the high mark;
//   - a request over the high mark takes one degradation step: the oldest
//     Live observations of earlier turns become Summary, then the oldest
//     Summaries become Gist, then the oldest whole turns are dropped, until
//     the request is under the low mark;
//   - the current turn's observations stay Live unless the turn alone is
//     over the high mark; then they are degraded the same way, oldest first;
//   - what a step degraded stays degraded.
//
// The levels are a state, and Project recomputes it: it replays every model
// call the session made since msgs[0] (one before each assistant message),
// each with the same system prompt and budget, and takes a step wherever one
// crossed the high mark. So Project stays a pure function of its input, the
// levels of what was sent change only at a step, and the prompt-cache prefix
// stays the same between steps. The newest user turn is always kept, even
// when it alone exceeds the budget: the provider's refusal is clearer than
// an empty request.
//
// Project reads msgs without modifying them, and the same input gives the
// same output. Texts.Project gives the same View at the cost of the turns
// since the last call instead of the whole input.
func Project(system string, msgs []llm.Message, opt Options) View {
	sys := opt.systemTokens(system)
	r := newReplay(nil, splitTurns(msgs, nil), 0, opt, sys)
	v := r.run(system, sys, 0)
	if len(r.turns) == 0 {
		v.Omitted = len(msgs)
	}
	return v
}

// turnIn is one user turn of the input, repaired: its user message first.
type turnIn struct {
	msgs []llm.Message
	// orig is the index of its user message in the input.
	orig int
	// first is the index of its first message in the replay's costs.
	first int
}

// splitTurns cuts the concatenation of a and b into user turns, each
// repaired on its own: Repair is decided turn by turn (a call's results
// follow it within its turn), so repairing the turns one by one gives what
// repairing the whole gives, and messages before the first user message are
// dropped as Repair drops them. A turn within one slice is a sub-slice of it;
// only a turn that spans both is copied.
func splitTurns(a, b []llm.Message) []turnIn {
	n := len(a) + len(b)
	at := func(i int) *llm.Message {
		if i < len(a) {
			return &a[i]
		}
		return &b[i-len(a)]
	}
	var users []int
	for i := range n {
		if at(i).Role == llm.RoleUser {
			users = append(users, i)
		}
	}
	turns := make([]turnIn, len(users))
	for k, u := range users {
		end := n
		if k+1 < len(users) {
			end = users[k+1]
		}
		var msgs []llm.Message
		switch {
		case end <= len(a):
			msgs = a[u:end]
		case u >= len(a):
			msgs = b[u-len(a) : end-len(a)]
		default:
			msgs = append(append(make([]llm.Message, 0, end-u), a[u:]...), b[:end-len(a)]...)
		}
		turns[k] = turnIn{msgs: Repair(msgs), orig: u}
	}
	return turns
}

// pos is a message's position in the input: its turn's number in the high
// half, its index within the repaired turn in the low half, so positions
// compare in input order.
type pos int64

func at(t, i int) pos           { return pos(t)<<32 | pos(i) }
func (p pos) split() (t, i int) { return int(p >> 32), int(p & (1<<32 - 1)) }

// state is what the degradation steps so far decided. It only moves
// forward: cut, summary and gist never decrease, and pinned only grows.
type state struct {
	// cut is the number of the first turn sent.
	cut int
	// Observations before summary are at Summary or less, those before
	// gist at Gist.
	summary, gist pos
	// pinned are turns a step degraded during the turn itself (the turn
	// alone was over the high mark). Their user message was then the
	// newest, sent as written, and it stays so: a step never changes what
	// the request that took it sent.
	pinned []int
	// steps counts the steps taken.
	steps int
}

// replay recomputes the state by walking the model calls of the input in
// order and then renders the current request.
type replay struct {
	// texts caches estimates; only those of turns before addBefore (the
	// stored turns that are complete) are added to it, so a turn that is
	// never stored leaves nothing behind.
	texts     *Texts
	addBefore int
	turns     []turnIn // turns[k] is turn number base+k
	// costs caches each message's cost per level, in its turn (+3) and
	// later; 0 until computed. A message's slots start at its turn's first.
	costs [][6]int32
	base  int
	// hi and lo are the limits of the messages' tokens at the high and
	// low marks; hi < 0 means no limit.
	hi, lo int
	state
	// now is the number of the turn being walked (the current turn of the
	// call being replayed); old is the cost of turns cut…now-1 as earlier
	// turns, cur of the messages of turn now walked so far (upto of them).
	now, upto int
	old, cur  int
	stepped   bool
	// onEnter, if set, is called as the walk enters each turn.
	onEnter func(t int)
}

func newReplay(texts *Texts, turns []turnIn, base int, opt Options, sys int) *replay {
	n := 0
	for k := range turns {
		turns[k].first = n
		n += len(turns[k].msgs)
	}
	r := &replay{texts: texts, turns: turns, base: base, costs: make([][6]int32, n)}
	r.hi, r.lo = opt.limits(sys)
	r.cut, r.now = base, base
	r.summary, r.gist = at(base, 0), at(base, 0)
	return r
}

func (r *replay) msgs(t int) []llm.Message { return r.turns[t-r.base].msgs }

// run walks the turns from r.now to the last and renders the last call:
// the messages of turns r.cut… at the levels the state gives. offset is
// the index in the input of r.turns[0]'s origin, for View.Omitted.
func (r *replay) run(system string, sys, offset int) View {
	v := View{System: system, Tokens: sys}
	last := r.base + len(r.turns) - 1
	if len(r.turns) == 0 {
		return v
	}
	for t := r.now; t <= last; t++ {
		r.enter(t)
		for i, m := range r.msgs(t) {
			if m.Role == llm.RoleAssistant {
				r.stepped = false
				r.check(t, i)
			}
			r.cur += r.cost(t, i, r.level(t, i))
			r.upto = i + 1
		}
	}
	r.stepped = false
	r.check(last, r.upto)

	v.Steps, v.Stepped = r.steps, r.stepped
	v.Tokens += r.old + r.cur
	v.Omitted = offset + r.turns[r.cut-r.base].orig
	n := 0
	for t := r.cut; t <= last; t++ {
		n += len(r.msgs(t))
	}
	v.Messages = make([]llm.Message, 0, n)
	for t := r.cut; t <= last; t++ {
		for i, m := range r.msgs(t) {
			l := r.level(t, i)
			if isObservation(m) {
				v.Levels[l].Messages++
				v.Levels[l].Tokens += r.cost(t, i, l)
			}
			v.Messages = append(v.Messages, renderAt(m, l, t == last && i == 0))
		}
	}
	return v
}

// enter makes turn t the current one: the turn before it now counts as an
// earlier turn (no thinking, images as notes).
func (r *replay) enter(t int) {
	if t != r.now {
		prev := r.now
		r.now, r.cur, r.upto = t, 0, 0
		if prev >= r.cut {
			for i := range r.msgs(prev) {
				r.old += r.cost(prev, i, r.level(prev, i))
			}
		}
	}
	if r.onEnter != nil {
		r.onEnter(t)
	}
}

// level is the rendering of message i of turn t under the current state.
func (r *replay) level(t, i int) llm.Level {
	m := &r.msgs(t)[i]
	if !isObservation(*m) {
		return llm.Live
	}
	if i == 0 && (t == r.now || slices.Contains(r.pinned, t)) {
		return llm.Live // the newest user message is sent as written
	}
	switch p := at(t, i); {
	case p < r.gist:
		return llm.Gist
	case p < r.summary:
		return llm.Summary
	}
	return llm.Live
}

// cost is message i of turn t's token cost at level l, as part of the
// current turn or of an earlier one.
//
// A message is costed several times as the walk goes (in its turn, as an
// earlier turn, before and after a level change), so the costs are kept
// per message, level and role of the turn.
func (r *replay) cost(t, i int, l llm.Level) int {
	cur := t == r.now
	m := &r.msgs(t)[i]
	k := int(l)
	if cur && turnDependent(m) {
		k += 3
	}
	slot := &r.costs[r.turns[t-r.base].first+i][k]
	if *slot > 0 {
		return int(*slot)
	}
	c := messageCost(texter{c: r.texts, add: t < r.addBefore}, m, l, cur, cur && i == 0)
	*slot = int32(c)
	return c
}

// turnDependent reports whether m costs differently in its own turn and
// later: thinking counts only in its turn, and an image is a note later.
func turnDependent(m *llm.Message) bool {
	for _, p := range m.Parts {
		if p.Kind == llm.PartThinking || p.Kind == llm.PartImage {
			return true
		}
	}
	return false
}

func (r *replay) total() int { return r.old + r.cur }

// check is the model call before message i of turn t (or, with i at the
// turn's end, the current call): if the messages walked so far exceed the
// high mark, it takes a degradation step down to the low mark.
func (r *replay) check(t, i int) {
	if r.hi < 0 || r.total() <= r.hi {
		return
	}
	r.steps++
	r.stepped = true
	// Earlier turns: Live → Summary, then Summary → Gist, oldest first.
	r.degrade(at(t, 0))
	// Then the oldest whole turns.
	for r.total() > r.lo && r.cut < t {
		for k := range r.msgs(r.cut) {
			r.old -= r.cost(r.cut, k, r.level(r.cut, k))
		}
		r.cut++
	}
	// The current turn alone is over the high mark: its own observations,
	// oldest first.
	if r.total() > r.hi {
		if !slices.Contains(r.pinned, t) {
			r.pinned = append(r.pinned, t)
		}
		r.degrade(at(t, i))
	}
}

// degrade moves the summary pointer, then the gist pointer, forward over
// the observations before limit until the walked messages fit the low mark.
func (r *replay) degrade(limit pos) {
	floor := at(r.cut, 0)
	r.summary, r.gist = max(r.summary, floor), max(r.gist, floor)
	r.advance(&r.summary, limit)
	r.advance(&r.gist, r.summary)
}

// advance moves *p forward one message at a time up to limit while the
// walked messages exceed the low mark, updating their cost as each message
// it passes changes level.
func (r *replay) advance(p *pos, limit pos) {
	for *p < limit && r.total() > r.lo {
		t, i := p.split()
		msgs := r.msgs(t)
		before := r.level(t, i)
		if i+1 < len(msgs) {
			*p = at(t, i+1)
		} else {
			*p = at(t+1, 0)
		}
		if after := r.level(t, i); after != before {
			d := r.cost(t, i, after) - r.cost(t, i, before)
			if t < r.now {
				r.old += d
			} else {
				r.cur += d
			}
		}
	}
}

// isObservation reports whether m has renderings to choose from: a tool
// message, or a user message with a summarized text part.
func isObservation(m llm.Message) bool {
	switch m.Role {
	case llm.RoleTool:
		return true
	case llm.RoleUser:
		for _, p := range m.Parts {
			if p.Kind == llm.PartText && (p.Summary != "" || p.Gist != "") {
				return true
			}
		}
	}
	return false
}

// renderAt returns m with its observation renderings at level l in
// Text/Content.Live, and (unless it is the newest user message) its images
// as short text notes. m itself is never modified; an unchanged message is
// returned as is.
func renderAt(m llm.Message, l llm.Level, newestUser bool) llm.Message {
	switch m.Role {
	case llm.RoleTool:
		if !needsToolCopy(m, l) {
			return m
		}
		return mapParts(m, func(part llm.Part) llm.Part {
			if part.Result != nil {
				r := *part.Result
				r.Content = llm.Content{Live: r.Content.At(l)}
				if l != llm.Live {
					r.Images = nil // the gist counts them; a summary is text only
				}
				part.Result = &r
			}
			return part
		})
	case llm.RoleUser:
		if !needsUserCopy(m, newestUser) {
			return m
		}
		return mapParts(m, func(part llm.Part) llm.Part {
			switch {
			case part.Kind == llm.PartText:
				part.Text = textAt(part, l)
				part.Summary, part.Gist = "", ""
			case part.Kind == llm.PartImage && !newestUser:
				part = llm.Text(imageNote(part.Image))
			}
			return part
		})
	}
	return m
}

// mapParts returns a copy of m whose parts are f of m's, leaving m's own
// Parts untouched.
func mapParts(m llm.Message, f func(llm.Part) llm.Part) llm.Message {
	out := m
	out.Parts = make([]llm.Part, len(m.Parts))
	for k, part := range m.Parts {
		out.Parts[k] = f(part)
	}
	return out
}

// needsToolCopy reports whether rendering m at l changes any result.
func needsToolCopy(m llm.Message, l llm.Level) bool {
	for _, p := range m.Parts {
		if r := p.Result; r != nil && (r.Content.Summary != "" || r.Content.Gist != "" || (l != llm.Live && len(r.Images) > 0)) {
			return true
		}
	}
	return false
}

func needsUserCopy(m llm.Message, newestUser bool) bool {
	for _, p := range m.Parts {
		if p.Summary != "" || p.Gist != "" || (p.Kind == llm.PartImage && !newestUser) {
			return true
		}
	}
	return false
}

// textAt is a text part's rendering at level l.
func textAt(p llm.Part, l llm.Level) string {
	return llm.Content{Live: p.Text, Summary: p.Summary, Gist: p.Gist}.At(l)
}

// imageNote stands in for an image of an earlier turn: a picture is paid
// for in the turn it was sent, not in every later one.
func imageNote(img *llm.Image) string {
	switch {
	case img == nil:
		return "[image]"
	case img.Path != "":
		return "[image: " + img.Path + "]"
	case img.URL != "":
		return "[image: " + clip(img.URL, 80) + "]"
	}
	return fmt.Sprintf("[image: %s, %s]", img.MIME, bytesize.Format(int64(len(img.Data))))
}

// messageCost estimates m rendered at level l. Thinking counts only in the
// newest turn (inTurn): OpenAI-compatible adapters never send it back,
// Anthropic ignores earlier turns' thinking, and the Responses API's
// encrypted reasoning items of earlier turns are replayed but not counted
// into the context by OpenAI.
func messageCost(c texter, m *llm.Message, l llm.Level, inTurn, newestUser bool) int {
	n := messageOverhead
	for _, p := range m.Parts {
		switch p.Kind {
		case llm.PartText:
			n += c.text(textAt(p, l))
		case llm.PartThinking:
			if inTurn {
				n += c.text(p.Text)
			}
		case llm.PartToolResult:
			n += callOverhead + c.text(p.Result.Content.At(l))
			if l == llm.Live {
				n += imageTokens * len(p.Result.Images)
			}
		case llm.PartImage:
			if newestUser {
				n += imageTokens
			} else {
				n += EstimateText(imageNote(p.Image))
			}
		default:
			n += partTokens(c, p)
		}
	}
	return n
}
