package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// fileSession builds a session of turns, each a user message and reads of
// a file of size bytes (reads[k] in turn k), answered. The last turn is
// left unanswered when open (its calls are the current call's).
func fileSession(size int, reads []int, open bool) []llm.Message {
	t0 := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	body := lines("src/server.go", size/60)
	var s []llm.Message
	n := 0
	for k, r := range reads {
		t0 = t0.Add(time.Minute)
		s = append(s, userText(t0, fmt.Sprintf("turn %d: please look at src/server.go again", k)))
		for range r {
			n++
			c := llm.ToolCall{ID: fmt.Sprintf("read%d", n), Name: "read_file", Arguments: json.RawMessage(`{"path":"src/server.go"}`)}
			s = append(s, toolStep(t0, c), toolMessage(t0, []llm.ToolCall{c}, []string{body}, nil))
		}
		if !open || k < len(reads)-1 {
			s = append(s, llm.Message{Role: llm.RoleAssistant, Time: t0, Parts: []llm.Part{llm.Text(fmt.Sprintf("Done with turn %d.", k))}})
		}
	}
	return s
}

// levelSeq lists the levels the tool results of v were sent at, oldest
// first.
func levelSeq(v View, input []llm.Message) []llm.Level {
	levels := levelsSent(v, input)
	var out []llm.Level
	for _, m := range v.Messages {
		for _, r := range m.ToolResults() {
			out = append(out, levels[r.ToolCallID])
		}
	}
	return out
}

// The issue's case (docs/history.md#levels-of-detail): a 200k-token window
// about 90 % free and a turn that reads a 7.7 KB file eight times. The old
// projection sent only the newest result whole, six as head+tail and one as a
// line; now all stay Live, whether the reads are in the current turn or partly
// in the one before.
func TestProjectIssueScenarioAllLive(t *testing.T) {
	const budget = 200_000 - 8192
	system := strings.Repeat("You are nanobot. Follow the rules in AGENTS.md. ", 300)
	for _, reads := range [][]int{{8}, {4, 4}, {1, 1, 1, 1, 1, 1, 1, 1}} {
		msgs := fileSession(7700, reads, true)
		v := Project(system, msgs, Options{Budget: budget})
		checkView(t, v, msgs, budget)
		seq := levelSeq(v, msgs)
		if len(seq) != 8 {
			t.Fatalf("reads %v: %d results sent, want 8", reads, len(seq))
		}
		for k, l := range seq {
			if l != llm.Live {
				t.Errorf("reads %v: result %d sent at %s, want live (%d of %d tokens used)", reads, k+1, l, v.Tokens, budget)
			}
		}
		if v.Steps != 0 || v.Tokens > budget/5 {
			t.Errorf("reads %v: %d steps, %d tokens; want none, about 10%% of %d", reads, v.Steps, v.Tokens, budget)
		}
	}
}

// Under pressure the first call over the high mark degrades the oldest
// results first (Live → Summary, then Summary → Gist, then whole turns),
// down to the low mark in one step; the current turn stays Live.
func TestProjectPressureDegradesOldestFirst(t *testing.T) {
	const budget = 20_000
	opt := Options{Budget: budget}
	reads := make([]int, 150)
	for k := range reads {
		reads[k] = 1 + k%2
	}
	all := fileSession(7700, reads, false)
	hi, lo := opt.limits(EstimateText(testSystem))
	var prev View
	first, gisted, dropped := false, false, false
	agentCalls(all, opt, func(end int, v View) {
		checkView(t, v, all[:end], budget)
		checkCurrentTurn(t, v, all[:end], opt)
		seq := levelSeq(v, all[:end])
		// View.Levels counts what was sent at each level (one result per
		// tool message here).
		var count [3]int
		for _, l := range seq {
			count[l]++
		}
		for l := range count {
			if v.Levels[l].Messages != count[l] || (count[l] > 0) != (v.Levels[l].Tokens > 0) {
				t.Fatalf("call at %d: Levels %+v, but %d results were sent at %s", end, v.Levels, count[l], llm.Level(l))
			}
		}
		// Oldest first: levels never rise from older to newer.
		for k := 1; k < len(seq); k++ {
			if seq[k] > seq[k-1] {
				t.Fatalf("call at %d: result %d sent at %s after an older one at %s: %v", end, k, seq[k], seq[k-1], seq)
			}
		}
		if v.Stepped {
			if v.Tokens-EstimateText(testSystem) > lo {
				t.Fatalf("call at %d: a step left %d tokens of messages, want at most the low mark %d", end, v.Tokens, lo)
			}
			if !first {
				first = true
				if prev.Steps != 0 || prev.Tokens-EstimateText(testSystem) > hi {
					t.Fatalf("first step at %d: the call before had %d steps, %d tokens", end, prev.Steps, prev.Tokens)
				}
				for _, l := range levelSeq(prev, all[:end]) {
					if l != llm.Live {
						t.Fatalf("before the first step a result was sent at %s", l)
					}
				}
				if seq[0] != llm.Summary || seq[len(seq)-1] != llm.Live {
					t.Fatalf("first step: levels %v, want the oldest at summary, the newest live", seq)
				}
			}
			gisted = gisted || seq[0] == llm.Gist
			dropped = dropped || v.Omitted > 0
		}
		prev = v
	})
	if !first || !gisted || !dropped {
		t.Fatalf("the session never reached each stage: stepped %v, gisted %v, dropped turns %v", first, gisted, dropped)
	}
}

// A result degraded by a step stays degraded at the calls after it, while
// they take no step; a result is never sent at a higher level again.
func TestProjectDegradedStaysDegraded(t *testing.T) {
	opt := Options{Budget: 30_000}
	all := fileSession(7700, []int{2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}, false)
	before := map[string]llm.Level{}
	steps, kept := 0, 0
	agentCalls(all, opt, func(end int, v View) {
		now := levelsSent(v, all[:end])
		for id, l := range before {
			nl, sent := now[id]
			if !sent {
				continue
			}
			if nl < l {
				t.Fatalf("call at %d: %s sent at %s after %s", end, id, nl, l)
			}
			if !v.Stepped && nl != l {
				t.Fatalf("call at %d: %s changed from %s to %s without a step", end, id, l, nl)
			}
			if l != llm.Live && !v.Stepped {
				kept++
			}
		}
		if v.Stepped {
			steps++
		}
		before = now
	})
	if steps < 2 || kept == 0 {
		t.Fatalf("%d steps, %d degraded results kept across calls: the test needs pressure", steps, kept)
	}
}

// The current turn's results stay Live while earlier turns give way; when
// the turn alone exceeds the high mark, its own results are degraded,
// oldest first, and its user message is still sent as written, then and in
// later turns (a step never changes what the call that took it sent).
func TestProjectCurrentTurnLiveUnlessAloneOver(t *testing.T) {
	opt := Options{Budget: 16_000}
	hi, lo := opt.limits(EstimateText(testSystem))
	// Earlier turns of one read each, then a turn of 14 reads (~26k
	// tokens Live: alone over budget), then two short turns.
	all := fileSession(7700, []int{1, 1, 1, 14, 0, 0}, false)
	pasted := userText(all[0].Time, "please review:\n"+lines("pasted", 60))
	big := turnStarts(all)[3]
	all[big] = pasted
	liveBefore, degradedInTurn, sentAfter := false, false, false
	agentCalls(all, opt, func(end int, v View) {
		checkView(t, v, all[:end], opt.Budget)
		checkCurrentTurn(t, v, all[:end], opt)
		starts := turnStarts(v.Messages)
		cur := v.Messages[starts[len(starts)-1]:]
		seq := levelSeq(View{Messages: cur}, all[:end])
		if end < turnStarts(all)[4] && end > big {
			if len(seq) > 0 && seq[len(seq)-1] != llm.Live {
				t.Fatalf("call at %d: the newest result of the turn sent at %s", end, seq[len(seq)-1])
			}
			alive := true
			for _, l := range seq {
				alive = alive && l == llm.Live
			}
			if alive && len(seq) >= 2 && v.Omitted < big {
				liveBefore = true // earlier turns still there, the turn Live
			}
			if !alive {
				degradedInTurn = true
				// A step ends under the low mark, or, when the turn alone
				// is between the marks, with the earlier turns dropped.
				msgTokens := v.Tokens - EstimateText(testSystem)
				if v.Stepped && msgTokens > lo && (len(starts) > 1 || msgTokens > hi) {
					t.Fatalf("call at %d: %d tokens after a step within the turn (marks %d, %d; %d turns)", end, msgTokens, lo, hi, len(starts))
				}
			}
		}
		// The big turn's pasted message is sent as written whenever it is
		// sent: it was the newest when its turn was degraded.
		for _, m := range v.Messages {
			if m.Role == llm.RoleUser && strings.HasPrefix(m.Text(), "please review:") {
				if m.Text() != pasted.Parts[0].Text {
					t.Fatalf("call at %d: the pasted message was sent shortened", end)
				}
				sentAfter = sentAfter || end > turnStarts(all)[4]
			}
		}
	})
	if !liveBefore || !degradedInTurn || !sentAfter {
		t.Fatalf("stages not reached: live while earlier turns gave way %v, degraded in the turn %v, sent in a later turn %v", liveBefore, degradedInTurn, sentAfter)
	}
}
