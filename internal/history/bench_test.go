package history

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// BenchmarkProject measures one model call's projection as the agent makes
// it (Texts.Project of the stored session and the current turn) for
// sessions of 100 and 10,000 stored entries since the consolidation offset,
// with a 128k-token model, an 8k reply reserve and a 12 KB system prompt
// whose estimate the agent has cached. "warm" is every call after a turn's
// first (and every first call of a turn that follows one in the same loaded
// session): it resumes from the state remembered as the walk entered the
// current turn. "cold" is a session just loaded (or the JetStream store,
// which keeps no session loaded): the walk starts at the consolidation
// offset.
//
//	go test -run '^$' -bench Project -count 6 ./internal/history/
func BenchmarkProject(b *testing.B) {
	system := strings.Repeat("You are nanobot. Follow the workspace rules in AGENTS.md. ", 200)
	const budget = 128_000 - 8192
	session := genSession(11, "b", 4000)
	for _, n := range []int{100, 1000, 3000, 10_000} {
		// The stored part ends with the current turn's user message, as in
		// the agent; the turn's calls and results follow.
		end := len(session) - 1
		for session[end].Role != llm.RoleUser {
			end--
		}
		stored := session[end-n+1 : end+1]
		turn := session[end+1:]
		opt := Options{Budget: budget, SystemTokens: EstimateText(system)}
		for _, warm := range []bool{true, false} {
			name := fmt.Sprintf("entries=%d/cold", n)
			if warm {
				name = fmt.Sprintf("entries=%d/warm", n)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				var v View
				texts := &Texts{}
				texts.Project(system, stored, turn, opt)
				for b.Loop() {
					if !warm {
						texts.mu.Lock()
						texts.cp = nil
						texts.mu.Unlock()
					}
					v = texts.Project(system, stored, turn, opt)
				}
				b.ReportMetric(float64(len(v.Messages)), "msgs")
				b.ReportMetric(float64(v.Tokens), "tokens")
				b.ReportMetric(float64(v.Steps), "steps")
				if v.Stepped {
					b.ReportMetric(1, "stepped")
				}
			})
		}
	}
}

// BenchmarkPrefixChanges replays a 500-turn generated session (reads of
// small and large files, parallel calls, errors, pasted documents,
// thinking; images left out, as an image turning into a note is not the
// projection's choice) call by call, each call projecting everything before
// the assistant message it produced, and counts the calls whose messages do
// not start with the previous call's messages byte for byte: the calls that
// miss a provider's prompt cache after the system prompt. It uses only
// Project(system, msgs, Options{Budget}) so that the same file measures the
// algorithm before the budget rule (docs/history.md#levels-of-detail, commit
// 1de2323) too. One iteration is the whole replay:
//
//	go test -run '^$' -bench PrefixChanges -benchtime 1x ./internal/history/
func BenchmarkPrefixChanges(b *testing.B) {
	all := genSession(42, "g", 500)
	for i, m := range all { // drop images (see above)
		if m.Role != llm.RoleUser {
			continue
		}
		var parts []llm.Part
		for _, p := range m.Parts {
			if p.Kind != llm.PartImage {
				parts = append(parts, p)
			}
		}
		all[i].Parts = parts
	}
	var ends []int
	live := map[string]string{} // each result as stored, by call id
	for i, m := range all {
		if m.Role == llm.RoleAssistant {
			ends = append(ends, i)
		}
		for _, r := range m.ToolResults() {
			live[r.ToolCallID] = r.Content.Live
		}
	}
	for _, budget := range []int{200_000 - 8192, 60_000, 20_000} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			var changed, degraded int
			var used float64
			for b.Loop() {
				changed, degraded, used = 0, 0, 0
				var prev []llm.Message
				for _, end := range ends {
					v := Project(testSystem, all[:end], Options{Budget: budget})
					used += float64(v.Tokens) / float64(budget)
					for _, m := range v.Messages {
						for _, r := range m.ToolResults() {
							if r.Content.Live != live[r.ToolCallID] {
								degraded++
							}
						}
					}
					same := prev != nil && len(prev) <= len(v.Messages)
					for k := 0; same && k < len(prev); k++ {
						same = sameSent(prev[k], v.Messages[k])
					}
					if prev != nil && !same {
						changed++
					}
					prev = v.Messages
				}
			}
			b.ReportMetric(float64(len(ends)), "calls")
			b.ReportMetric(float64(changed), "prefix-changed")
			b.ReportMetric(100*float64(changed)/float64(len(ends)), "%changed")
			b.ReportMetric(100*used/float64(len(ends)), "%budget-used")
			b.ReportMetric(float64(degraded)/float64(len(ends)), "degraded-results/call")
		})
	}
}
