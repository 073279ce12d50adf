package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// history.budget and the water marks reach the projection: a turn reading
// a 7.7 KB file eight times sends every result whole with the default
// budget (issue 29, point 4), and gives up detail, oldest first, when
// history.budget leaves no room for it.
func TestHistoryConfigReachesTheProjection(t *testing.T) {
	body := strings.Repeat("a line of the file under review, with a few words in it\n", 135)
	run := func(tweak func(*Config)) []fakellm.Request {
		h := newHarness(t, tweak)
		h.writeFile("big.md", body)
		var replies []fakellm.Reply
		for i := range 8 {
			replies = append(replies, fakellm.Reply{ToolCalls: []fakellm.Call{{ID: fmt.Sprintf("r%d", i), Name: "read_file", Args: `{"path":"big.md"}`}}})
		}
		h.script.Push(append(replies, fakellm.Reply{Text: "done"})...)
		h.send("c1", "read big.md eight times")
		h.waitFinals("c1", 1)
		return h.script.Requests()
	}
	// shortened counts the results of the last request sent shorter than
	// the first time they were seen (whole, in the second request).
	shortened := func(reqs []fakellm.Request) (results, short []int) {
		whole := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults[0].Content
		for k, m := range reqs[len(reqs)-1].Messages {
			for _, r := range m.ToolResults {
				results = append(results, k)
				if r.Content != whole {
					short = append(short, k)
				}
			}
		}
		return results, short
	}
	reqs := run(func(*Config) {})
	if results, short := shortened(reqs); len(results) != 8 || len(short) != 0 {
		t.Fatalf("default budget: %d results, %d shortened; want 8 whole", len(results), len(short))
	}
	system := history.EstimateText(reqs[0].System)
	reqs = run(func(c *Config) { c.HistoryBudget = system + 6000 })
	results, short := shortened(reqs)
	if len(results) != 8 || len(short) == 0 || short[0] != results[0] || short[len(short)-1] == results[len(results)-1] {
		t.Fatalf("history.budget %d: results at %v, shortened %v; want the oldest shortened, the newest whole", system+6000, results, short)
	}
}

func TestProjectionOptions(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want history.Options
	}{
		{"route budget", Config{}, history.Options{Budget: 100_000, SystemTokens: 50}},
		{"budget lowered", Config{HistoryBudget: 30_000}, history.Options{Budget: 30_000, SystemTokens: 50}},
		{"budget over the route's is ignored", Config{HistoryBudget: 300_000}, history.Options{Budget: 100_000, SystemTokens: 50}},
		{"marks", Config{HistoryHighWater: 0.9, HistoryLowWater: 0.5}, history.Options{Budget: 100_000, SystemTokens: 50, HighWater: 0.9, LowWater: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Agent{cfg: tt.cfg}).projection(100_000, 50); got != tt.want {
				t.Errorf("projection = %+v, want %+v", got, tt.want)
			}
		})
	}
}
