package history

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkProject measures one model call's projection as the agent makes
// it (Window over the stored session and the current turn, then Project)
// for sessions of 100 and 10,000 stored entries, with a 128k-token model,
// an 8k reply reserve and a 12 KB system prompt whose estimate the agent
// has cached, and the texts' estimates cached across calls (Texts), as the
// agent keeps them.
//
//	go test -run '^$' -bench Project -count 6 ./internal/history/
func BenchmarkProject(b *testing.B) {
	system := strings.Repeat("You are nanobot. Follow the workspace rules in AGENTS.md. ", 200)
	const budget = 128_000 - 8192
	session := genSession(11, "b", 4000)
	for _, n := range []int{100, 10_000} {
		if len(session) < n+2 {
			b.Fatalf("generator gave %d entries", len(session))
		}
		stored := session[len(session)-n-2 : len(session)-2]
		turn := session[len(session)-2:]
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var v View
			texts := &Texts{}
			opt := Options{Budget: budget, SystemTokens: EstimateText(system), Windowed: true, Texts: texts}
			for b.Loop() {
				v = Project(system, texts.Window(stored, turn, budget), opt)
			}
			b.ReportMetric(float64(len(v.Messages)), "msgs")
			b.ReportMetric(float64(v.Tokens), "tokens")
		})
	}
}
