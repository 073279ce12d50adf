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
	// Levels counts every observation sent, once, at some level, and its
	// tokens are part of the request's.
	observations, counted, tokens := 0, 0, 0
	for _, m := range tail {
		if isObservation(m) {
			observations++
		}
	}
	for _, l := range v.Levels {
		counted += l.Messages
		tokens += l.Tokens
	}
	if counted != observations || tokens > v.Tokens {
		t.Fatalf("Levels %+v count %d observations of %d tokens; the view sends %d, of %d tokens in all",
			v.Levels, counted, tokens, observations, v.Tokens)
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
		checkCurrentTurn(t, v, msgs, opt)
		// Texts.Project, which resumes from the state it remembers for a
		// loaded session, gives the same View for any split into stored
		// messages and the current turn: cold, then warm (a small cache, so
		// generations swap within the test, shared across seeds as the
		// agent shares one per session).
		k := rng.IntN(len(msgs) + 1)
		for range 2 {
			got := texts.Project(testSystem, msgs[:k], msgs[k:], opt)
			if jsonOf(t, got) != jsonOf(t, v) {
				t.Fatalf("seed %d budget %d: Texts.Project of a split at %d differs from Project", seed, budget, k)
			}
		}
	}
}

// checkCurrentTurn asserts that the current turn's observations are sent
// Live unless the turn alone, everything Live, exceeds the high mark.
func checkCurrentTurn(t *testing.T, v View, input []llm.Message, opt Options) {
	t.Helper()
	newest := -1
	for i, m := range v.Messages {
		if m.Role == llm.RoleUser {
			newest = i
		}
	}
	if newest < 0 {
		return
	}
	allLive := true
	for _, m := range v.Messages[newest:] {
		if m.Role == llm.RoleTool && !isLive(&m, input) {
			allLive = false
		}
	}
	if allLive {
		return
	}
	turns := splitTurns(input, nil)
	cur := turns[len(turns)-1].msgs
	alone := 0
	for i := range cur {
		alone += messageCost(texter{}, &cur[i], llm.Live, true, i == 0)
	}
	if hi, _ := opt.limits(EstimateText(v.System)); hi >= 0 && alone <= hi {
		t.Fatalf("a result of the current turn is degraded although the turn alone (%d tokens) fits the high mark %d", alone, hi)
	}
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

// TestTextsProjectResumes walks sessions call by call as the agent does
// (stored: the session up to the current user message; turn: the current
// turn's messages so far), with one Texts per session, and checks each View
// against Project of the whole input, also after the consolidation offset
// moved (a new origin) or the system prompt changed size (other limits):
// then the remembered state no longer applies.
func TestTextsProjectResumes(t *testing.T) {
	for _, tt := range []struct {
		seed   uint64
		turns  int
		budget int
	}{{21, 120, 9000}, {22, 80, 3000}, {23, 60, 0}, {24, 150, 30000}} {
		all := genSession(tt.seed, "r", tt.turns)
		texts := &Texts{}
		opt := Options{Budget: tt.budget}
		origin, lastUser, resumed := 0, 0, 0
		for i, m := range all {
			if m.Role == llm.RoleUser {
				lastUser = i
				if i-origin > 200 { // consolidation: the offset moves to this turn
					origin = i
				}
			}
			if m.Role != llm.RoleAssistant {
				continue
			}
			stored, turn := all[origin:lastUser+1], all[lastUser+1:i]
			texts.mu.Lock()
			if texts.cp != nil && texts.cp.origin == identity(&stored[0]) {
				resumed++
			}
			texts.mu.Unlock()
			// Now and then the system prompt changes size (MEMORY.md was
			// rewritten): the remembered state was for other limits.
			system := testSystem
			if i%7 == 0 {
				system += " Keep answers short, and cite the notes you used."
			}
			got := texts.Project(system, stored, turn, opt)
			want := Project(system, all[origin:i], opt)
			if jsonOf(t, got) != jsonOf(t, want) {
				t.Fatalf("seed %d, call at %d: Texts.Project differs from Project (%d/%d messages, steps %d/%d)",
					tt.seed, i, len(got.Messages), len(want.Messages), got.Steps, want.Steps)
			}
		}
		if resumed == 0 {
			t.Errorf("seed %d: no call resumed from a remembered state", tt.seed)
		}
	}
}

// calls returns where a session's model calls were: before each assistant
// message (that call saw the messages before it).
func calls(msgs []llm.Message) []int {
	var out []int
	for i, m := range msgs {
		if m.Role == llm.RoleAssistant {
			out = append(out, i)
		}
	}
	return out
}

// withoutImages drops the user messages' images: an image is sent with
// its turn and as a note afterwards, a change of what was sent that is not
// a degradation (docs/history.md), so the prefix tests leave them out.
func withoutImages(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.Role != llm.RoleUser {
			continue
		}
		out[i].Parts = nil
		for _, p := range m.Parts {
			if p.Kind != llm.PartImage {
				out[i].Parts = append(out[i].Parts, p)
			}
		}
	}
	return out
}

// levelsSent maps each tool call id sent in v to the level it was sent at
// (a rendering equal to a fuller one counts as the fuller).
func levelsSent(v View, input []llm.Message) map[string]llm.Level {
	stored := map[string]llm.Content{}
	for _, m := range input {
		for _, r := range m.ToolResults() {
			stored[r.ToolCallID] = r.Content
		}
	}
	out := map[string]llm.Level{}
	for _, m := range v.Messages {
		for _, r := range m.ToolResults() {
			c := stored[r.ToolCallID]
			switch r.Content.Live {
			case c.Live:
				out[r.ToolCallID] = llm.Live
			case c.At(llm.Summary):
				out[r.ToolCallID] = llm.Summary
			default:
				out[r.ToolCallID] = llm.Gist
			}
		}
	}
	return out
}

// agentCalls replays all call by call as the agent makes its calls: stored
// is the session up to the current user message, turn the current turn's
// messages so far, one Texts for the session. It calls f with each call's
// end (the index of the assistant message it produced) and View.
func agentCalls(all []llm.Message, opt Options, f func(end int, v View)) {
	texts := &Texts{}
	lastUser := 0
	for _, end := range calls(all) {
		for k := end - 1; k >= 0; k-- {
			if all[k].Role == llm.RoleUser {
				lastUser = k
				break
			}
		}
		f(end, texts.Project(testSystem, all[:lastUser+1], all[lastUser+1:end], opt))
	}
}

// TestProjectPrefixStableBetweenSteps replays a long session call by call
// under budgets from ample to tight and checks what a provider's prompt
// cache sees: a call's messages start with the previous call's messages,
// byte for byte, unless the call took a degradation step; a result once
// degraded is never sent at a higher level again; the cut never moves back;
// a step ends under the low mark and every call is under the high mark,
// unless only the current turn is left.
func TestProjectPrefixStableBetweenSteps(t *testing.T) {
	all := withoutImages(genSession(42, "g", 500))
	sys := EstimateText(testSystem)
	// A budget that holds the whole session Live: no step may happen.
	ample := Project(testSystem, all, Options{}).Tokens + 100
	for _, budget := range []int{ample, 192_000, 60_000, 20_000, 6_000} {
		opt := Options{Budget: budget}
		hi, lo := opt.limits(sys)
		var prev View
		prevLevels := map[string]llm.Level{}
		changed, steps, requests := 0, 0, 0
		var used float64
		agentCalls(all, opt, func(end int, v View) {
			requests++
			used += float64(v.Tokens) / float64(budget)
			earlier := len(turnStarts(v.Messages)) > 1
			if v.Stepped {
				steps++
				if v.Tokens-sys > lo && earlier {
					t.Fatalf("budget %d, call at %d: a step left %d tokens of messages, over the low mark %d with earlier turns kept", budget, end, v.Tokens-sys, lo)
				}
			}
			if v.Tokens-sys > hi && earlier {
				t.Fatalf("budget %d, call at %d: %d tokens of messages, over the high mark %d with earlier turns kept", budget, end, v.Tokens-sys, hi)
			}
			if prev.Messages != nil {
				prefix := len(prev.Messages) <= len(v.Messages)
				for k := 0; prefix && k < len(prev.Messages); k++ {
					prefix = sameSent(prev.Messages[k], v.Messages[k])
				}
				if !prefix {
					changed++
					if !v.Stepped {
						t.Fatalf("budget %d, call at %d: the previous call's messages are no prefix of this one, and it took no step", budget, end)
					}
				}
				if v.Omitted < prev.Omitted {
					t.Fatalf("budget %d, call at %d: the cut moved back from %d to %d", budget, end, prev.Omitted, v.Omitted)
				}
			}
			levels := levelsSent(v, all[:end])
			for id, l := range levels {
				if p, ok := prevLevels[id]; ok && l < p {
					t.Fatalf("budget %d, call at %d: result %s sent at %s after %s", budget, end, id, l, p)
				}
			}
			prev, prevLevels = v, levels
		})
		t.Logf("budget %7d: %d calls, %d steps, prefix changed in %d (%.1f%%); %.0f%% of the budget used on average",
			budget, requests, steps, changed, 100*float64(changed)/float64(requests), 100*used/float64(requests))
		if budget == ample && steps != 0 {
			t.Errorf("budget %d: %d steps, want none: the session fits", budget, steps)
		}
		if budget <= 60_000 && steps == 0 {
			t.Errorf("budget %d: no step; the test needs pressure", budget)
		}
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
