package web

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/nanobot-go/nanobot/internal/usage"
)

// The panel's Usage view: cost per day for a number of days, stacked by
// origin or model, and the table behind it, straight from the usage ledger
// (Panel.Ledger), so the panel shows what /usage, nanobot usage and the
// metrics show.

// usageDays is how many days the Usage view shows by default, and
// maxUsageDays the most it may ask for.
const (
	usageDays    = 30
	maxUsageDays = 366
)

// UsageTotals are a set of calls' sums as the panel's page reads them:
// the ledger's totals with the cost in dollars (null when a model in them
// has no price), its priced part, and the text every surface writes.
type UsageTotals struct {
	Calls      int64    `json:"calls"`
	Failed     int64    `json:"failed"`
	Estimated  int64    `json:"estimated"`
	Input      int64    `json:"input_tokens"`
	Output     int64    `json:"output_tokens"`
	CacheRead  int64    `json:"cache_read_tokens"`
	CacheWrite int64    `json:"cache_write_tokens"`
	Cost       *float64 `json:"cost"`
	Priced     float64  `json:"priced"`
	Unpriced   int64    `json:"unpriced_calls"`
	CostText   string   `json:"cost_text"`
}

func totalsOf(t usage.Totals) UsageTotals {
	return UsageTotals{
		Calls: t.Calls, Failed: t.Failed, Estimated: t.Estimated, Input: t.Input, Output: t.Output,
		CacheRead: t.CacheRead, CacheWrite: t.CacheWrite,
		Cost: t.Cost.JSONUSD(), Priced: t.Cost.PricedUSD(), Unpriced: t.Cost.UnpricedCalls(), CostText: t.Cost.String(),
	}
}

// UsageGroup is one origin's or model's sums.
type UsageGroup struct {
	Key string `json:"key"`
	UsageTotals
}

// UsageDay is one date's sums, with its groups' (the bar's segments).
type UsageDay struct {
	Date string `json:"date"`
	UsageTotals
	Groups []UsageGroup `json:"groups"`
}

// UsageView is what GET /api/panel/usage answers.
type UsageView struct {
	From     string      `json:"from"`
	To       string      `json:"to"`
	Timezone string      `json:"timezone"`
	By       string      `json:"by"`
	Total    UsageTotals `json:"total"`
	// Keys are the groups of the whole period in the order the chart
	// stacks and colours them (most expensive first).
	Keys   []string     `json:"keys"`
	Groups []UsageGroup `json:"groups"`
	Days   []UsageDay   `json:"days"`
}

func groupsOf(gs []usage.Group) []UsageGroup {
	out := make([]UsageGroup, 0, len(gs))
	for _, g := range gs {
		out = append(out, UsageGroup{Key: g.Key, UsageTotals: totalsOf(g.Totals)})
	}
	return out
}

// usageView answers GET /api/panel/usage?days=30&by=origin|model.
func (p *Panel) usageView(w http.ResponseWriter, r *http.Request) {
	if p.Ledger == nil {
		writeError(w, http.StatusNotFound, "this process keeps no usage ledger")
		return
	}
	by := usage.Dimension(r.URL.Query().Get("by"))
	if by == "" {
		by = usage.ByOrigin
	}
	if !slices.Contains(usage.Dimensions, by) {
		writeError(w, http.StatusBadRequest, "by: one of chat, model, origin")
		return
	}
	days := usageDays
	if s := r.URL.Query().Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxUsageDays {
			writeError(w, http.StatusBadRequest, "days: a number from 1 to "+strconv.Itoa(maxUsageDays))
			return
		}
		days = n
	}
	period := usage.LastDays(p.Ledger.Now(), p.Ledger.Location(), days)
	rep, err := p.Ledger.Query(usage.Query{Period: period, By: by, Daily: true})
	if err != nil {
		p.fail(w, "usage", err)
		return
	}
	v := UsageView{From: rep.Period.From, To: rep.Period.To, Timezone: rep.Location, By: string(by),
		Total: totalsOf(rep.Total), Groups: groupsOf(rep.Groups), Keys: []string{}, Days: make([]UsageDay, 0, len(rep.Days))}
	for _, g := range rep.Groups {
		v.Keys = append(v.Keys, g.Key)
	}
	for _, d := range rep.Days {
		v.Days = append(v.Days, UsageDay{Date: d.Date, UsageTotals: totalsOf(d.Totals), Groups: groupsOf(d.Groups)})
	}
	writeJSON(w, http.StatusOK, v)
}

// ModelUsage is one provider/model's calls today and this month, from the
// ledger, for the status view.
type ModelUsage struct {
	Model string      `json:"model"`
	Today UsageTotals `json:"today"`
	Month UsageTotals `json:"month"`
}

// modelUsage is the status view's table: each model of this month, with
// today's and the month's sums.
func (p *Panel) modelUsage() ([]ModelUsage, error) {
	now, loc := p.Ledger.Now(), p.Ledger.Location()
	month, err := p.Ledger.Query(usage.Query{Period: usage.Month(now, loc), By: usage.ByModel})
	if err != nil {
		return nil, err
	}
	today, err := p.Ledger.Query(usage.Query{Period: usage.Today(now, loc), By: usage.ByModel})
	if err != nil {
		return nil, err
	}
	byModel := map[string]usage.Totals{}
	for _, g := range today.Groups {
		byModel[g.Key] = g.Totals
	}
	out := make([]ModelUsage, 0, len(month.Groups))
	for _, g := range month.Groups {
		out = append(out, ModelUsage{Model: g.Key, Today: totalsOf(byModel[g.Key]), Month: totalsOf(g.Totals)})
	}
	return out, nil
}
