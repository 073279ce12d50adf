package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// TestBudgetOvershootUnder50Chats: 50 Telegram chats write at once to a
// daemon with a $1 daily budget whose turns cost $0.10 each (1000 output
// tokens at a price of $100 per million). Every chat gets an answer: the
// model's, or the budget's sentence. The day's spend passes $1 by less
// than the model calls that can be in flight together
// (agents.max_concurrent_turns, 4): each turn is admitted, holding a model
// slot, against the spend recorded so far. A restart keeps the day's
// spend, and the next message is refused without a model call.
func TestBudgetOvershootUnder50Chats(t *testing.T) {
	const chats, perTurn, limit, slots = 50, 0.10, 1.0, 4
	g := newGW(t, setup{telegram: `allow_from: ["*"]`})
	for range chats {
		g.script.Push(fakellm.Reply{Text: "an answer", OutputTokens: 1000, InputTokens: 1})
	}
	extra := `budget: {daily: 1, warn_at: 0, timezone: Europe/Berlin}
prices:
  openai/gpt-4o-mini: {input: 0, output: 100}
`
	g.writeConfig(setup{telegram: `allow_from: ["*"]`}, extra)
	g.start()
	for i := range chats {
		g.tg.PushMessage(telegramfake.DM(int64(1000+i), fmt.Sprintf("question %d", i)))
	}
	const stopText = "today's budget of $1 is spent; it resets at 00:00 Europe/Berlin; /usage shows where it went."
	answered, stopped := 0, 0
	for i := range chats {
		chat := int64(1000 + i)
		var text string
		g.waitUntil(fmt.Sprintf("chat %d's answer", chat), func() bool {
			v := g.tg.Visible(chat)
			if len(v) == 0 {
				return false
			}
			text = v[len(v)-1]
			return text == "an answer" || strings.Contains(text, stopText)
		})
		switch {
		case text == "an answer":
			answered++
		case strings.Contains(text, stopText):
			stopped++
		default:
			t.Errorf("chat %d reads %q", i, text)
		}
	}
	spent := g.gateway.core.Usage.Spent(usage.Scope{})
	if s := spent.Day.PricedUSD(); s < limit || s > limit+slots*perTurn+1e-9 {
		t.Errorf("spent $%.2f with a $%.2f budget: more than %d turns in flight over", s, limit, slots)
	}
	if calls := len(g.script.Requests()); calls != answered || stopped == 0 || answered+stopped != chats {
		t.Errorf("%d model calls, %d answered, %d stopped", calls, answered, stopped)
	}

	// A restart mid-day keeps the day's spend.
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	g.start()
	if again := g.gateway.core.Usage.Spent(usage.Scope{}); again != spent {
		t.Errorf("after a restart the day's spend is %+v, want %+v", again, spent)
	}
	before := len(g.script.Requests())
	g.tg.PushMessage(telegramfake.DM(1000, "one more"))
	g.waitUntil("the budget's answer after the restart", func() bool {
		v := g.tg.Visible(1000)
		return len(v) > 0 && strings.Contains(v[len(v)-1], stopText) && len(v) >= 2
	})
	if n := len(g.script.Requests()); n != before {
		t.Errorf("%d model calls past a spent budget after the restart", n-before)
	}
}
