package history

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

const testSystem = "You are nanobot, a helpful assistant."

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkView asserts what every projection of input must satisfy: it starts
// with a user message; every call is followed by exactly its results in
// order and no result lacks its call; it is the repaired input cut at a user
// message, with only observation renderings changed (and older images turned
// into notes); it is within budget unless only the newest turn is left; the
// newest user message is sent as written.
func checkView(t *testing.T, v View, input []llm.Message, budget int) {
	t.Helper()
	msgs := v.Messages
	rep := Repair(input)
	if len(msgs) == 0 {
		if len(turnStarts(rep)) > 0 {
			t.Fatalf("empty projection of a history with user messages")
		}
		return
	}
	if msgs[0].Role != llm.RoleUser {
		t.Fatalf("projection starts with %s", msgs[0].Role)
	}
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			t.Fatalf("message %d invalid: %v", i, err)
		}
		if calls := m.ToolCalls(); len(calls) > 0 {
			if i+1 >= len(msgs) || msgs[i+1].Role != llm.RoleTool {
				t.Fatalf("message %d: calls without a tool message after them", i)
			}
			rs := msgs[i+1].ToolResults()
			if len(rs) != len(calls) {
				t.Fatalf("message %d: %d calls, %d results", i, len(calls), len(rs))
			}
			for k := range calls {
				if rs[k].ToolCallID != calls[k].ID {
					t.Fatalf("message %d: result %d answers %s, want %s", i, k, rs[k].ToolCallID, calls[k].ID)
				}
			}
		}
		if m.Role == llm.RoleTool && (i == 0 || len(msgs[i-1].ToolCalls()) == 0) {
			t.Fatalf("message %d: orphan tool message", i)
		}
	}
	if len(msgs) > len(rep) {
		t.Fatalf("projection has %d messages, repaired input %d", len(msgs), len(rep))
	}
	tail := rep[len(rep)-len(msgs):]
	if shape(tail) != shape(msgs) {
		t.Fatalf("projection is not a user-turn suffix of the input:\n got %s\nwant %s", shape(msgs), shape(tail))
	}
	newest := len(msgs) - 1
	for msgs[newest].Role != llm.RoleUser {
		newest--
	}
	for i := range msgs {
		switch msgs[i].Role {
		case llm.RoleAssistant:
			if !reflect.DeepEqual(msgs[i], tail[i]) {
				t.Fatalf("assistant message %d changed", i)
			}
		case llm.RoleTool:
			for k, r := range msgs[i].ToolResults() {
				in := tail[i].ToolResults()[k]
				if levelName(in.Content, r.Content.Live) == "changed!" {
					t.Fatalf("result %s holds none of its stored renderings", r.ToolCallID)
				}
			}
		case llm.RoleUser:
			if i == newest && !reflect.DeepEqual(stripRenderings(tail[i]), msgs[i]) {
				t.Fatalf("newest user message not sent as written")
			}
		}
	}
	if budget > 0 && v.Tokens > budget && len(turnStarts(msgs)) > 1 {
		t.Fatalf("tokens %d over budget %d with %d turns kept", v.Tokens, budget, len(turnStarts(msgs)))
	}
}

// turnStarts returns the index of every user message.
func turnStarts(msgs []llm.Message) []int {
	var starts []int
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			starts = append(starts, i)
		}
	}
	return starts
}

func stripRenderings(m llm.Message) llm.Message {
	out := m
	out.Parts = append([]llm.Part(nil), m.Parts...)
	changed := false
	for k := range out.Parts {
		if out.Parts[k].Summary != "" || out.Parts[k].Gist != "" {
			out.Parts[k].Summary, out.Parts[k].Gist = "", ""
			changed = true
		}
	}
	if !changed {
		return m
	}
	return out
}

// TestProjectProperties projects random sessions, started at random
// offsets (orphans, consolidation offsets), at random budgets.
func TestProjectProperties(t *testing.T) {
	budgets := []int{0, 300, 1500, 4000, 12000, 50000}
	texts := &Texts{limit: 16 << 10}
	for seed := uint64(1); seed <= 150; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		full := genSession(seed, "s", 3+rng.IntN(40))
		msgs := full[rng.IntN(len(full)/3+1):]
		if rng.IntN(4) == 0 { // lose a tool message: its calls get synthetic results
			if i := rng.IntN(len(msgs)); msgs[i].Role == llm.RoleTool {
				msgs = append(append([]llm.Message(nil), msgs[:i]...), msgs[i+1:]...)
			}
		}
		budget := budgets[rng.IntN(len(budgets))]
		opt := Options{Budget: budget}
		before := jsonOf(t, msgs)
		v := Project(testSystem, msgs, opt)
		checkView(t, v, msgs, budget)
		if jsonOf(t, msgs) != before {
			t.Fatalf("seed %d: Project modified its input", seed)
		}
		if jsonOf(t, Project(testSystem, msgs, opt)) != jsonOf(t, v) {
			t.Fatalf("seed %d: Project is not deterministic", seed)
		}
		if v.Degradation <= SummariesGisted {
			if obs := newestObservation(v.Messages); obs != nil && !isLive(obs, msgs) {
				t.Fatalf("seed %d: newest observation not live in %s mode", seed, v.Degradation)
			}
		}
		k := rng.IntN(len(msgs) + 1)
		w := Window(msgs[:k], msgs[k:], budget)
		wv := Project(testSystem, w, opt)
		if wv.Omitted+len(msgs)-len(w) != v.Omitted {
			t.Fatalf("seed %d: omitted %d via window (+%d outside), %d directly", seed, wv.Omitted, len(msgs)-len(w), v.Omitted)
		}
		// Telling Project the input is windowed skips only work that
		// Window did.
		if jsonOf(t, Project(testSystem, w, Options{Budget: budget, Windowed: true})) != jsonOf(t, wv) {
			t.Fatalf("seed %d budget %d: projecting Window with Windowed differs from projecting it without", seed, budget)
		}
		// With cached estimates (a small cache, so generations swap within
		// the test, shared across seeds as the agent shares one), twice:
		// cold, then warm.
		for range 2 {
			cw := texts.Window(msgs[:k], msgs[k:], budget)
			if len(cw) != len(w) {
				t.Fatalf("seed %d budget %d: Window with cached estimates kept %d messages, without %d", seed, budget, len(cw), len(w))
			}
			if jsonOf(t, Project(testSystem, cw, Options{Budget: budget, Windowed: true, Texts: texts})) != jsonOf(t, wv) {
				t.Fatalf("seed %d budget %d: projecting with cached estimates differs from projecting without", seed, budget)
			}
		}
		wv.Omitted = v.Omitted
		if jsonOf(t, wv) != jsonOf(t, v) {
			t.Fatalf("seed %d budget %d: projecting Window differs from projecting everything", seed, budget)
		}
	}
}

func newestObservation(msgs []llm.Message) *llm.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleTool {
			return &msgs[i]
		}
		if msgs[i].Role == llm.RoleUser && i != len(msgs)-1 && hasLongText(msgs[i]) {
			return nil // the newest observation is a user text; skip
		}
	}
	return nil
}

func hasLongText(m llm.Message) bool {
	return len(m.Text()) > summaryThreshold
}

func isLive(obs *llm.Message, input []llm.Message) bool {
	for _, r := range obs.ToolResults() {
		for _, m := range input {
			for _, in := range m.ToolResults() {
				if in.ToolCallID == r.ToolCallID && in.Content.Live != r.Content.Live {
					return false
				}
			}
		}
	}
	return true
}

// TestProjectNewestTurnsIndependentOfSessionLength is the prompt-cache
// property: the newest turns project to the same bytes whether 100 or
// 10,000 entries precede them, and the whole projection is the same when
// the older entries differ only beyond what the budget can reach.
func TestProjectNewestTurnsIndependentOfSessionLength(t *testing.T) {
	tail := genSession(99, "tail", 30)
	older := genSession(5, "old", 3000)
	const budget = 128_000 - 8192
	views := map[int]View{}
	for _, n := range []int{100, 10_000} {
		if len(older) < n {
			t.Fatalf("generator gave %d entries, want %d", len(older), n)
		}
		msgs := append(append([]llm.Message(nil), older[len(older)-n:]...), tail...)
		stored, turn := msgs[:len(msgs)-2], msgs[len(msgs)-2:]
		views[n] = Project(testSystem, Window(stored, turn, budget), Options{Budget: budget})
		if len(views[n].Messages) < len(tail) {
			t.Fatalf("%d older entries: only %d messages projected", n, len(views[n].Messages))
		}
	}
	a, b := views[100].Messages, views[10_000].Messages
	if ja, jb := jsonOf(t, a[len(a)-len(tail):]), jsonOf(t, b[len(b)-len(tail):]); ja != jb {
		t.Errorf("the newest %d messages project differently after 100 and 10,000 older entries", len(tail))
	}
	// With a budget that reaches into the older entries but not past the
	// newest 100 of them, the whole projection is the same.
	short := genSession(77, "short", 3)
	const smallBudget = 2500
	small := map[int]string{}
	for _, n := range []int{100, 10_000} {
		msgs := append(append([]llm.Message(nil), older[len(older)-n:]...), short...)
		w := Window(msgs, nil, smallBudget)
		if len(w) <= len(short) || len(w) >= len(short)+100 {
			t.Fatalf("window of %d messages: want it to reach into the newest 100 older entries only", len(w))
		}
		small[n] = jsonOf(t, Project(testSystem, w, Options{Budget: smallBudget}).Messages)
	}
	if small[100] != small[10_000] {
		t.Errorf("projections within a small budget differ with 100 and 10,000 older entries")
	}
}

// TestProjectStableAcrossTurns grows a session turn by turn under a fixed
// budget and measures what a provider prompt cache sees: how often the
// first message sent changes (a full miss), whether the cut ever moves back,
// and how much of the previous request is still a prefix of the next.
func TestProjectStableAcrossTurns(t *testing.T) {
	all := genSession(42, "g", 560)
	starts := turnStarts(all)
	const budget = 60_000
	var prev []llm.Message
	prevOmitted := 0
	cutMoves, backMoves, turns := 0, 0, 0
	var keptShare, used float64
	for k := 1; k < len(starts); k++ {
		msgs := all[:starts[k]]
		v := Project(testSystem, Window(msgs, nil, budget), Options{Budget: budget})
		v.Omitted += len(msgs) - len(Window(msgs, nil, budget))
		if prev != nil && v.Omitted > 0 {
			turns++
			used += float64(v.Tokens) / budget
			if v.Omitted < prevOmitted {
				backMoves++
			}
			same := 0
			if !sameSent(prev[0], v.Messages[0]) {
				cutMoves++
			} else {
				for same < len(prev) && same < len(v.Messages) && sameSent(prev[same], v.Messages[same]) {
					same++
				}
			}
			keptShare += float64(same) / float64(len(prev))
		}
		prev, prevOmitted = v.Messages, v.Omitted
	}
	if turns < 200 {
		t.Fatalf("only %d turns over budget; the test needs a longer session", turns)
	}
	t.Logf("%d turns over budget: cut moved forward in %d, back in %d; on average %.0f%% of the previous request's messages stayed a prefix; %.0f%% of the budget used",
		turns, cutMoves, backMoves, 100*keptShare/float64(turns), 100*used/float64(turns))
	if cutMoves > turns*15/100 || backMoves > 0 {
		t.Errorf("cut moved in %d of %d turns (%d back)", cutMoves, turns, backMoves)
	}
	if keptShare/float64(turns) < 0.8 {
		t.Errorf("only %.0f%% kept as prefix", 100*keptShare/float64(turns))
	}
}

// sameSent reports whether a and b would be sent as the same bytes: they
// agree on everything an adapter reads.
func sameSent(a, b llm.Message) bool {
	if a.Role != b.Role || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i, p := range a.Parts {
		q := b.Parts[i]
		if p.Kind != q.Kind || p.Text != q.Text || p.Signature != q.Signature || (p.Call == nil) != (q.Call == nil) ||
			(p.Result == nil) != (q.Result == nil) || (p.Image == nil) != (q.Image == nil) {
			return false
		}
		if p.Call != nil && (p.Call.ID != q.Call.ID || string(p.Call.Arguments) != string(q.Call.Arguments)) {
			return false
		}
		if r, s := p.Result, q.Result; r != nil && (r.ToolCallID != s.ToolCallID || r.Content.Live != s.Content.Live || r.IsError != s.IsError || len(r.Images) != len(s.Images)) {
			return false
		}
		if p.Image != nil && (p.Image.Path != q.Image.Path || p.Image.URL != q.Image.URL || len(p.Image.Data) != len(q.Image.Data)) {
			return false
		}
	}
	return true
}

// shape renders a history compactly: u a c(ids) t(ids).
func shape(msgs []llm.Message) string {
	var b []string
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			b = append(b, "u")
		case llm.RoleAssistant:
			if cs := m.ToolCalls(); len(cs) > 0 {
				var ids []string
				for _, c := range cs {
					ids = append(ids, c.ID)
				}
				b = append(b, "c("+strings.Join(ids, ",")+")")
			} else {
				b = append(b, "a")
			}
		case llm.RoleTool:
			var ids []string
			for _, r := range m.ToolResults() {
				id := r.ToolCallID
				if r.IsError {
					id += "!"
				}
				ids = append(ids, id)
			}
			b = append(b, "t("+strings.Join(ids, ",")+")")
		}
	}
	return strings.Join(b, " ")
}
