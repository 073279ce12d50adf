package daemon

import (
	"bufio"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/web"
)

// metricSum adds up the samples of a Prometheus counter in a scrape whose
// labels include every one of match ("kind=\"input\"").
func metricSum(t *testing.T, body, name string, match ...string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		all := true
		for _, m := range match {
			all = all && strings.Contains(labels, m)
		}
		if !all {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// The surfaces agree (docs/usage.md#where-you-see-it): after turns of two
// Telegram chats over the fake OpenAI server — one with a tool call, one
// whose first attempt the provider refuses and the router retries — what
// nanobot usage reads from the ledger's files, the owner's /usage, the
// panel's Usage view and the Prometheus counters hold the same calls,
// tokens and cost.
func TestUsageSurfacesAgree(t *testing.T) {
	g := startWith(t, setup{openai: "max_retries: 1"})
	g.script.Push(fakellm.Reply{Text: "Hello!", InputTokens: 1200, OutputTokens: 30, CachedTokens: 1000})
	g.tg.PushMessage(telegramfake.DM(owner, "hello"))
	g.waitLast(owner, "Hello!")
	g.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "l1", Name: "list_dir", Args: `{"path":"."}`}}, InputTokens: 900, OutputTokens: 15},
		fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded", RetryAfter: "0"},
		fakellm.Reply{Text: "A few files.", InputTokens: 1000, OutputTokens: 20})
	g.tg.PushMessage(telegramfake.DM(owner+1, "what is in my workspace?"))
	g.waitLast(owner+1, "A few files.")

	// nanobot usage: the ledger's files, read as the command reads them.
	rep, err := ReadUsage(g.cfg, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	tot := rep.Total
	if tot.Calls != 4 || tot.Failed != 1 || tot.Input == 0 || tot.CacheRead == 0 || !tot.Cost.Known() || tot.Cost.PricedNanos() == 0 {
		t.Fatalf("the ledger holds %+v; want 4 attempts (one failed), cached input, a known cost", tot)
	}

	// /usage in the owner's chat: the whole daemon's today is the ledger's.
	g.tg.PushMessage(telegramfake.DM(owner, "/usage"))
	g.tg.Wait(t, "the /usage answer", func() bool {
		v := g.tg.Visible(owner)
		return len(v) > 0 && strings.Contains(v[len(v)-1], "The whole daemon")
	})
	v := g.tg.Visible(owner)
	answer := v[len(v)-1]
	if want := "The whole daemon:\nToday: " + agent.UsageLine(tot); !strings.Contains(answer, want) {
		t.Errorf("/usage =\n%s\nwant the ledger's %q", answer, want)
	}

	// The footer of an answer is what the ledger added for its turn, as
	// the router recorded it.
	g.tg.PushMessage(telegramfake.DM(owner, "/usage footer on"))
	g.tg.Wait(t, "the footer switched on", func() bool {
		v := g.tg.Visible(owner)
		return strings.Contains(v[len(v)-1], "now ends with its tokens and cost")
	})
	g.script.Push(fakellm.Reply{Text: "You're welcome.", InputTokens: 1500, OutputTokens: 5, CachedTokens: 1400})
	g.tg.PushMessage(telegramfake.DM(owner, "thanks"))
	g.tg.Wait(t, "the answer with its footer", func() bool {
		v := g.tg.Visible(owner)
		return strings.HasPrefix(v[len(v)-1], "You're welcome.")
	})
	after, err := ReadUsage(g.cfg, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	turn := usage.Totals{Calls: after.Total.Calls - tot.Calls, Input: after.Total.Input - tot.Input, Output: after.Total.Output - tot.Output,
		CacheRead: after.Total.CacheRead - tot.CacheRead, Cost: usage.Nanos(after.Total.Cost.PricedNanos() - tot.Cost.PricedNanos())}
	v = g.tg.Visible(owner)
	if want := "You're welcome.\n\n— " + agent.UsageLine(turn); v[len(v)-1] != want || turn.Calls != 1 {
		t.Errorf("answer = %q, want %q (the ledger's record of the turn)", v[len(v)-1], want)
	}
	tot = after.Total

	// The panel's Usage view.
	var view web.UsageView
	newWebClient(t, g).call("GET", "/api/panel/usage?days=1&by=model", "", &view)
	pt := view.Total
	if pt.Calls != tot.Calls || pt.Input != tot.Input || pt.Output != tot.Output || pt.CacheRead != tot.CacheRead ||
		pt.Cost == nil || *pt.Cost != tot.Cost.PricedUSD() || pt.CostText != tot.Cost.String() {
		t.Errorf("the panel's total %+v, the ledger's %+v", pt, tot)
	}

	// The Prometheus counters, fed by the ledger's record hook.
	_, body := g.get("/metrics")
	for _, c := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"nanobot_usage_calls_total", nil, float64(tot.Calls)},
		{"nanobot_usage_calls_total", []string{`outcome="retried"`}, float64(tot.Failed)},
		{"nanobot_usage_tokens_total", []string{`kind="input"`}, float64(tot.Input)},
		{"nanobot_usage_tokens_total", []string{`kind="output"`}, float64(tot.Output)},
		{"nanobot_usage_tokens_total", []string{`kind="cache_read"`}, float64(tot.CacheRead)},
		{"nanobot_usage_cost_usd_total", nil, tot.Cost.PricedUSD()},
	} {
		if got := metricSum(t, body, c.name, c.match...); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s%v = %v, the ledger's %v", c.name, c.match, got, c.want)
		}
	}
}

// seedLedger records calls on past days in the gateway's ledger before it
// starts: priced turns and heartbeats, and a model without a price.
func seedLedger(t *testing.T, g *gw, now time.Time) {
	t.Helper()
	loc, err := usage.Zone(g.cfg.Budget.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	l, err := usage.Open(g.cfg.Usage.Dir, usage.Options{Location: loc, Prices: usage.NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		ago    int
		origin usage.Origin
		model  string
		in     int
	}{
		{3, usage.OriginTurn, "gpt-4o-mini", 400_000},
		{3, usage.OriginHeartbeat, "gpt-4o-mini", 100_000},
		{10, usage.OriginCron, "gpt-4o-mini", 250_000},
		{20, usage.OriginTurn, "llama3", 5000}, // ollama-style: no price
	} {
		prov := "openai"
		if r.model == "llama3" {
			prov = "ollama"
		}
		if err := l.Record(context.Background(), usage.Record{Time: now.AddDate(0, 0, -r.ago), Chat: "telegram:100", Session: "telegram:100",
			Origin: r.origin, Provider: prov, Model: r.model, Tokens: llm.Usage{InputTokens: r.in, OutputTokens: r.in / 100}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// The panel's Usage view in Chromium: the chart has a bar for each day
// with calls (and none for the others), stacked by origin, then by model
// after the toggle, and the table's totals are the ledger's.
func TestUsageViewInBrowser(t *testing.T) {
	s := setup{}
	g := newGW(t, s)
	g.writeConfig(s, "")
	now := time.Now()
	seedLedger(t, g, now)
	g.start()
	g.script.Push(fakellm.Reply{Text: "Hi!", InputTokens: 3000, OutputTokens: 40, CachedTokens: 2000})
	g.tg.PushMessage(telegramfake.DM(owner, "hi"))
	g.waitLast(owner, "Hi!")

	b := newBrowser(t)
	tok := webToken(g)
	b.do("log in", chromedp.Navigate(g.base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), tok), chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#open-panel")))
	eval[bool](b, `(() => { window.csp = []; document.addEventListener('securitypolicyviolation',
		e => window.csp.push(e.violatedDirective + ' ' + e.blockedURI)); return true })()`)
	b.do("open the panel", chromedp.Click(chromedp.CSS("#open-panel")), chromedp.WaitVisible(chromedp.CSS("#tab-usage")))
	b.do("open usage", chromedp.Click(chromedp.CSS("#tab-usage")))
	b.until("the chart", `!!document.querySelector('#usage-chart g.day')`)

	rep, err := ReadUsage(g.cfg, 30, "origin")
	if err != nil {
		t.Fatal(err)
	}
	days, err := g.gatewayLedgerDays(30)
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 4 {
		t.Fatalf("the ledger has calls on %d days (%v), want 4", len(days), days)
	}
	check := func(by string) {
		t.Helper()
		got := eval[[]string](b, `[...document.querySelectorAll('#usage-chart g.day')].filter(g => g.querySelector('rect')).map(g => g.dataset.date)`)
		if strings.Join(got, " ") != strings.Join(days, " ") {
			t.Errorf("by %s: bars on %v, the ledger has calls on %v", by, got, days)
		}
		foot := eval[[]string](b, `[...document.querySelectorAll('#usage-table tfoot th')].map(c => c.textContent)`)
		tot := rep.Total
		want := []string{"Total", fmtInt(tot.Calls), fmtInt(tot.Input), fmtInt(tot.CacheRead), fmtInt(tot.CacheWrite), fmtInt(tot.Output), tot.Cost.String()}
		if strings.Join(foot, "|") != strings.Join(want, "|") {
			t.Errorf("by %s: the table's totals %q, the ledger's %q", by, foot, want)
		}
		if n := eval[int](b, `document.querySelectorAll('#usage-chart .unpriced').length`); n != 1 {
			t.Errorf("by %s: %d days marked unpriced, want the one with the model without a price", by, n)
		}
	}
	check("origin")
	if n := eval[int](b, `new Set([...document.querySelectorAll('#usage-chart rect.seg')].map(r => r.dataset.key)).size`); n != 3 {
		t.Errorf("by origin: %d origins stacked, want turn, heartbeat and cron", n)
	}
	b.screenshot("web-panel-usage.png")
	b.do("by model", chromedp.Click(chromedp.CSS("#usage-by-model")))
	b.until("the model view", `document.querySelector('#usage-by-model').classList.contains('active') && !!document.querySelector('#usage-chart g.day')`)
	check("model")
	if got := eval[[]string](b, `[...document.querySelectorAll('#usage-groups tbody tr td:first-child')].map(c => c.textContent)`); len(got) != 2 {
		t.Errorf("by model: groups %v, want openai/gpt-4o-mini and ollama/llama3", got)
	}
	if v := eval[[]string](b, `window.csp`); len(v) > 0 {
		t.Errorf("CSP violations in the Usage view: %v", v)
	}
}

// gatewayLedgerDays lists the dates of the last n days with calls, as
// the ledger sums them.
func (g *gw) gatewayLedgerDays(n int) ([]string, error) {
	loc, err := usage.Zone(g.cfg.Budget.Timezone)
	if err != nil {
		return nil, err
	}
	l, err := usage.OpenReadOnly(g.cfg.Usage.Dir, usage.Options{Location: loc})
	if err != nil {
		return nil, err
	}
	rep, err := l.Query(usage.Query{Period: usage.LastDays(time.Now(), loc, n), Daily: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range rep.Days {
		if d.Calls > 0 {
			out = append(out, d.Date)
		}
	}
	return out, nil
}

// fmtInt writes n as the page does (toLocaleString('en-US')).
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
