package history

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// DefaultSummaries is how many observations after the newest one are shown
// as Summary when Options.Summaries is 0 (S-V5: N [6]).
const DefaultSummaries = 6

// Marks keep the projection stable from one call to the next (see
// docs/history.md): about one observation and one user turn in markEvery is
// a mark, chosen by a hash of what it stores, so a mark never moves. The
// Summary band ends at a marked observation and a budget cut happens at a
// marked turn, so both move once every few turns instead of every turn, and
// the provider's prompt cache keeps the prefix before them.
const (
	markEvery = 4
	// markReach bounds how far past the N Summary observations the band
	// may reach while it waits for a mark.
	markReach = 3 * markEvery
	// cutEvery: about one user turn in cutEvery is a place to cut.
	cutEvery = 16
	// cutSlackDiv: a cut moves forward to a marked turn only when that gives
	// up at most 1/cutSlackDiv of the budget.
	cutSlackDiv = 8
	// reserveDiv: 1/reserveDiv of the budget is kept for the detail of
	// recent observations when deciding where to cut.
	reserveDiv = 5
)

// Options bound a projection.
type Options struct {
	// Budget is the number of tokens the system prompt and the messages may
	// use together; 0 or less means no limit.
	Budget int
	// Summaries is how many observations after the newest are rendered as
	// Summary before older ones become Gist; 0 means DefaultSummaries.
	Summaries int
	// SystemTokens, when positive, is EstimateText of the system prompt,
	// which a caller that caches its prompt has already computed; 0 means
	// Project estimates it.
	SystemTokens int
	// Windowed says the messages are what Window returned for the same
	// Budget. Window has then found where the budget runs out, and Project
	// does not look again: that walk estimates every message of the window.
	// The View is the same either way.
	Windowed bool
	// Texts, if set, is the session's cache of its stored texts' estimates,
	// filled by Texts.Window; Project only looks texts up in it.
	Texts *Texts
}

func (o Options) systemTokens(system string) int {
	if o.SystemTokens > 0 {
		return o.SystemTokens
	}
	return EstimateText(system)
}

func (o Options) summaries() int {
	if o.Summaries > 0 {
		return o.Summaries
	}
	return DefaultSummaries
}

// Degradation says how much detail a projection gave up to fit its budget,
// beyond dropping whole old turns.
type Degradation uint8

const (
	// Normal: the newest observation Live, the next N Summary, older Gist.
	Normal Degradation = iota
	// SummariesGisted: every observation but the newest at Gist.
	SummariesGisted
	// NewestSummarized: the newest observation at Summary, the rest Gist.
	NewestSummarized
	// AllGisted: every observation at Gist; the newest user turn may still
	// exceed the budget, as it is always kept.
	AllGisted
)

func (d Degradation) String() string {
	switch d {
	case Normal:
		return "normal"
	case SummariesGisted:
		return "summaries-gisted"
	case NewestSummarized:
		return "newest-summarized"
	case AllGisted:
		return "all-gisted"
	}
	return fmt.Sprintf("Degradation(%d)", uint8(d))
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
	// Degradation says how far detail was reduced to fit Budget.
	Degradation Degradation
}

// Project builds the request history from msgs, the session's entries in
// order (possibly followed by the current turn's messages), for a model
// call with system as its system prompt. It repairs msgs (see Repair),
// renders every observation (tool results and large user inputs) at a
// level of detail, and keeps the newest whole user turns that fit
// opt.Budget, degrading detail first when even the recent ones do not fit.
// The newest user turn is always kept, even when it alone exceeds the
// budget: the provider's refusal is clearer than an empty request.
//
// Project is pure: it reads msgs without modifying them, and the same
// input gives the same output. Entries before the point where even their
// cheapest rendering could not fit the budget are ignored, so projecting a
// whole session and projecting Window of it give the same View.
func Project(system string, msgs []llm.Message, opt Options) View {
	h := 0 // Window's output starts at its horizon
	if !opt.Windowed {
		h = horizon(opt.Texts, 0, len(msgs), func(i int) *llm.Message { return &msgs[i] }, opt.Budget)
	}
	p := newPlan(Repair(msgs[h:]), opt.summaries())
	p.texts = texter{c: opt.Texts}
	v := View{System: system, Tokens: opt.systemTokens(system)}
	if len(p.starts) == 0 {
		v.Omitted = len(msgs)
		return v
	}
	avail := -1 // unlimited
	if opt.Budget > 0 {
		avail = max(opt.Budget-v.Tokens, 0)
	}
	mode, cut := p.fit(avail)
	v.Degradation = mode
	v.Messages = make([]llm.Message, 0, len(p.msgs)-p.starts[cut])
	for i := p.starts[cut]; i < len(p.msgs); i++ {
		m, cost := p.render(i, mode)
		v.Messages = append(v.Messages, m)
		v.Tokens += cost
	}
	// Repair keeps every user message, so turn cut is the input's user
	// message cut after the horizon.
	v.Omitted = h + userIndex(msgs[h:], cut)
	return v
}

// userIndex returns the index of the k-th user message of msgs.
func userIndex(msgs []llm.Message, k int) int {
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return len(msgs)
}

// plan is the state of one projection over repaired messages.
type plan struct {
	msgs      []llm.Message
	summaries int
	texts     texter // looks up, never adds (see Texts)
	// starts holds the index of every user message (a turn's start); the
	// last is the newest user message, which is always Live.
	starts []int
	// rank is each message's observation rank, 0 for the newest
	// observation, -1 for messages that are not observations.
	rank []int
	// gistFrom is the rank from which observations are Gist in Normal mode.
	gistFrom int
	obsCount int
	// costs caches each message's token cost per level, -1 until computed.
	costs [][3]int
}

func newPlan(msgs []llm.Message, summaries int) *plan {
	p := &plan{msgs: msgs, summaries: summaries, rank: make([]int, len(msgs)), costs: make([][3]int, len(msgs))}
	var obs []int
	for i, m := range msgs {
		p.rank[i] = -1
		p.costs[i] = [3]int{-1, -1, -1}
		if m.Role == llm.RoleUser {
			p.starts = append(p.starts, i)
		}
	}
	newest := -1
	if len(p.starts) > 0 {
		newest = p.starts[len(p.starts)-1]
	}
	for i, m := range msgs {
		if i != newest && isObservation(m) {
			obs = append(obs, i)
		}
	}
	p.obsCount = len(obs)
	for k, i := range obs {
		p.rank[i] = len(obs) - 1 - k
	}
	// The Summary band reaches past rank N up to the next marked
	// observation, so its end moves only when a mark passes rank N.
	p.gistFrom = summaries + 1
	for r := summaries + 1; r <= summaries+markReach && r < len(obs); r++ {
		if marked(msgs[obs[len(obs)-1-r]]) {
			p.gistFrom = r
			break
		}
	}
	return p
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

// level is the rendering of message i in mode.
func (p *plan) level(i int, mode Degradation) llm.Level {
	r := p.rank[i]
	switch {
	case r < 0:
		return llm.Live
	case mode == AllGisted:
		return llm.Gist
	case r == 0 && mode == NewestSummarized:
		return llm.Summary
	case r == 0:
		return llm.Live
	case mode != Normal || r >= p.gistFrom:
		return llm.Gist
	}
	return llm.Summary
}

// cost is message i's token cost at level l.
func (p *plan) cost(i int, l llm.Level) int {
	if p.rank[i] < 0 {
		l = llm.Live
	}
	if c := p.costs[i][l]; c >= 0 {
		return c
	}
	c := messageCost(p.texts, &p.msgs[i], l, i >= p.starts[len(p.starts)-1], i == p.starts[len(p.starts)-1])
	p.costs[i][l] = c
	return c
}

// fit chooses the least degraded mode whose newest turns fit avail (< 0:
// unlimited) and the first turn to keep.
//
// Where to cut is decided on the turns' cheapest costs (every observation at
// Gist, which never changes once a message is stored), against avail less a
// reserve for the detail of the recent observations; so the cut only moves
// forward as the session grows, and only to a marked turn. Only when the
// reserve is too small is the cut moved further by the exact costs.
func (p *plan) fit(avail int) (Degradation, int) {
	last := len(p.starts) - 1
	// In Normal mode the turns holding the Summary band must fit;
	// otherwise only the newest turn must.
	band := last
	if p.obsCount > 0 {
		band = p.turnOf(p.obsAt(min(p.summaries, p.obsCount-1)))
	}
	start := 0
	if avail >= 0 {
		start = p.stableCut(avail-avail/reserveDiv, band)
	}
	for mode := Normal; ; mode++ {
		suffix := p.suffixCosts(mode)
		first := start
		for avail >= 0 && first < last && suffix[first] > avail {
			first++
		}
		protect := last
		if mode == Normal {
			protect = band
		}
		fits := avail < 0 || suffix[last] <= avail
		if (fits && first <= protect) || mode == AllGisted || p.obsCount == 0 {
			return mode, first
		}
	}
}

// stableCut returns the first turn to keep so that the cheapest costs of
// the kept turns fit limit: the oldest turn that fits, moved forward (never
// past turn bound) to the next marked turn when that gives up at most
// 1/cutSlackDiv of the limit. As a session grows, the cheapest costs of a
// fixed suffix only grow, so the result only moves forward, and by whole
// mark intervals.
func (p *plan) stableCut(limit, bound int) int {
	last := len(p.starts) - 1
	suffix := make([]int, len(p.starts))
	end, total := len(p.msgs), 0
	for t := last; t >= 0; t-- {
		for i := p.starts[t]; i < end; i++ {
			total += p.cheapest(i)
		}
		suffix[t] = total
		end = p.starts[t]
	}
	first := last
	for first > 0 && suffix[first-1] <= limit {
		first--
	}
	if first == 0 {
		return 0
	}
	// Marks are nested (a turn marked one in cutEvery is also marked one in
	// markEvery): the sparser ones when the budget has room for their
	// intervals, the denser ones otherwise.
	for _, every := range []uint32{cutEvery, markEvery} {
		for j := first; j <= min(bound, last-1); j++ {
			if markedEvery(p.msgs[p.starts[j]], every) {
				if suffix[first]-suffix[j] <= limit/cutSlackDiv {
					return j
				}
				break
			}
		}
	}
	return first
}

// cheapest is message i's cost with every observation at Gist, no thinking
// and images as notes: what it costs once it is old, which never changes.
func (p *plan) cheapest(i int) int {
	if i < p.starts[len(p.starts)-1] {
		return p.cost(i, llm.Gist) // the same, and cached
	}
	return messageCost(p.texts, &p.msgs[i], llm.Gist, false, false)
}

// suffixCosts returns, per turn, the cost of that turn and all newer ones.
func (p *plan) suffixCosts(mode Degradation) []int {
	suffix := make([]int, len(p.starts))
	end, total := len(p.msgs), 0
	for t := len(p.starts) - 1; t >= 0; t-- {
		for i := p.starts[t]; i < end; i++ {
			total += p.cost(i, p.level(i, mode))
		}
		suffix[t] = total
		end = p.starts[t]
	}
	return suffix
}

// obsAt returns the index of the observation of rank r.
func (p *plan) obsAt(r int) int {
	for i, rk := range p.rank {
		if rk == r {
			return i
		}
	}
	return len(p.msgs) - 1
}

// turnOf returns the turn holding message i.
func (p *plan) turnOf(i int) int {
	t := 0
	for k, s := range p.starts {
		if s <= i {
			t = k
		}
	}
	return t
}

// render returns message i as sent in mode, and its cost.
func (p *plan) render(i int, mode Degradation) (llm.Message, int) {
	l := p.level(i, mode)
	newest := i == p.starts[len(p.starts)-1]
	return renderAt(p.msgs[i], l, newest), p.cost(i, l)
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
		out := m
		out.Parts = make([]llm.Part, len(m.Parts))
		for k, part := range m.Parts {
			out.Parts[k] = part
			if part.Result == nil {
				continue
			}
			r := *part.Result
			r.Content = llm.Content{Live: r.Content.At(l)}
			if l != llm.Live {
				r.Images = nil // the gist counts them; a summary is text only
			}
			out.Parts[k].Result = &r
		}
		return out
	case llm.RoleUser:
		if !needsUserCopy(m, newestUser) {
			return m
		}
		out := m
		out.Parts = make([]llm.Part, len(m.Parts))
		for k, part := range m.Parts {
			switch {
			case part.Kind == llm.PartText:
				part.Text = textAt(part, l)
				part.Summary, part.Gist = "", ""
			case part.Kind == llm.PartImage && !newestUser:
				part = llm.Text(imageNote(part.Image))
			}
			out.Parts[k] = part
		}
		return out
	}
	return m
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
	return fmt.Sprintf("[image: %s, %s]", img.MIME, byteSize(len(img.Data)))
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

// minCost is the cheapest m can be in any projection: every rendering at
// its shortest. Window and Project use it to find where a budget runs out.
func minCost(c texter, m *llm.Message, inTurn, newestUser bool) int {
	l := llm.Gist
	if newestUser {
		l = llm.Live
	}
	return messageCost(c, m, l, inTurn, newestUser)
}

// horizon returns the index of the newest user message from which even the
// cheapest projection of the messages up to the end exceeds budget, or 0
// when there is none. Messages before it can never be sent.
//
// The texts of the first stored messages, at the cheapest rendering (the one
// Project uses for all but the newest turns), are added to c; the rest are
// only looked up.
func horizon(c *Texts, stored, n int, at func(int) *llm.Message, budget int) int {
	if budget <= 0 {
		return 0
	}
	used, inTurn := 0, true
	for i := n - 1; i >= 0; i-- {
		m := at(i)
		isUser := m.Role == llm.RoleUser
		used += minCost(texter{c, i < stored}, m, inTurn, isUser && inTurn)
		if isUser {
			if used > budget {
				return i
			}
			inTurn = false
		}
	}
	return 0
}

// Window returns the part of stored, followed by turn, that Project can
// use for budget: it starts at the newest user message from which even the
// cheapest projection exceeds the budget (see Project). Projecting a long
// session therefore costs what its tail costs, not its length, and gives
// the same View as projecting all of it. With budget ≤ 0 it returns
// everything.
func Window(stored, turn []llm.Message, budget int) []llm.Message {
	return (*Texts)(nil).Window(stored, turn, budget)
}

// Window is the package's Window with the estimates of stored's texts
// cached in c.
func (c *Texts) Window(stored, turn []llm.Message, budget int) []llm.Message {
	at := func(i int) *llm.Message {
		if i < len(stored) {
			return &stored[i]
		}
		return &turn[i-len(stored)]
	}
	start := horizon(c, len(stored), len(stored)+len(turn), at, budget)
	if len(turn) == 0 {
		return stored[start:]
	}
	if start >= len(stored) {
		return turn[start-len(stored):]
	}
	out := make([]llm.Message, 0, len(stored)-start+len(turn))
	out = append(out, stored[start:]...)
	return append(out, turn...)
}

// marked reports whether m is a mark: a fixed pseudo-random choice of about
// one message in markEvery, from what m stores (its time, and a tool
// message's first call id or a user message's first text), so it never
// changes.
func marked(m llm.Message) bool { return markedEvery(m, markEvery) }

// markedEvery reports whether m is one of about one in every n messages.
func markedEvery(m llm.Message, n uint32) bool {
	h := fnv.New32a()
	var buf [12]byte
	binary.LittleEndian.PutUint64(buf[:8], uint64(m.Time.Unix()))
	binary.LittleEndian.PutUint32(buf[8:], uint32(m.Time.Nanosecond()))
	_, _ = h.Write(buf[:])
	_, _ = h.Write([]byte(markKey(m)))
	return h.Sum32()%n == 0
}

func markKey(m llm.Message) string {
	for _, p := range m.Parts {
		switch {
		case p.Result != nil:
			return p.Result.ToolCallID
		case p.Kind == llm.PartText:
			return p.Text[:min(len(p.Text), 256)]
		}
	}
	return ""
}
