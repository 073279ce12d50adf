package usage

import (
	"cmp"
	"slices"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Totals are the sums of a set of records.
type Totals struct {
	// Calls counts attempts (a retried call is several).
	Calls int64 `json:"calls"`
	// Failed counts attempts that failed (retried or last).
	Failed int64 `json:"failed,omitempty"`
	// Estimated counts attempts whose tokens were estimated.
	Estimated  int64 `json:"estimated,omitempty"`
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
	Reasoning  int64 `json:"reasoning_tokens"`
	Cost       Cost  `json:"cost"`
}

// add adds one record.
func (t *Totals) add(r Record) {
	t.Calls++
	if r.Outcome != OutcomeOK {
		t.Failed++
	}
	if r.Estimated {
		t.Estimated++
	}
	t.addTokens(r.Tokens)
	t.Cost = t.Cost.Add(r.Cost)
}

func (t *Totals) addTokens(u llm.Usage) {
	t.Input += int64(u.InputTokens)
	t.Output += int64(u.OutputTokens)
	t.CacheRead += int64(u.CacheReadTokens)
	t.CacheWrite += int64(u.CacheWriteTokens)
	t.Reasoning += int64(u.ReasoningTokens)
}

// Add returns t + o.
func (t Totals) Add(o Totals) Totals {
	return Totals{
		Calls: t.Calls + o.Calls, Failed: t.Failed + o.Failed, Estimated: t.Estimated + o.Estimated,
		Input: t.Input + o.Input, Output: t.Output + o.Output, CacheRead: t.CacheRead + o.CacheRead,
		CacheWrite: t.CacheWrite + o.CacheWrite, Reasoning: t.Reasoning + o.Reasoning,
		Cost: t.Cost.Add(o.Cost),
	}
}

// Tokens is every token counted: input, cache read and write, output.
func (t Totals) Tokens() int64 { return t.Input + t.CacheRead + t.CacheWrite + t.Output }

// Period is a range of local days, both ends included, as "2006-01-02"
// dates in the ledger's location.
type Period struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Today is the local day of now in loc.
func Today(now time.Time, loc *time.Location) Period {
	d := now.In(loc).Format(time.DateOnly)
	return Period{From: d, To: d}
}

// Week is the local week of now in loc, Monday to today.
func Week(now time.Time, loc *time.Location) Period {
	t := now.In(loc)
	back := (int(t.Weekday()) + 6) % 7 // days since Monday
	return Period{From: t.AddDate(0, 0, -back).Format(time.DateOnly), To: t.Format(time.DateOnly)}
}

// Month is the local month of now in loc, the 1st to today.
func Month(now time.Time, loc *time.Location) Period {
	t := now.In(loc)
	return Period{From: time.Date(t.Year(), t.Month(), 1, 12, 0, 0, 0, loc).Format(time.DateOnly), To: t.Format(time.DateOnly)}
}

// LastDays is the n local days up to and including today (n ≥ 1).
func LastDays(now time.Time, loc *time.Location, n int) Period {
	t := now.In(loc)
	return Period{From: t.AddDate(0, 0, -(max(n, 1) - 1)).Format(time.DateOnly), To: t.Format(time.DateOnly)}
}

// Dates lists the period's dates in order; nil for a malformed period.
func (p Period) Dates() []string {
	from, err1 := time.Parse(time.DateOnly, p.From)
	to, err2 := time.Parse(time.DateOnly, p.To)
	if err1 != nil || err2 != nil || to.Before(from) {
		return nil
	}
	var out []string
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		out = append(out, d.Format(time.DateOnly))
	}
	return out
}

// Dimension is what a query groups by.
type Dimension string

const (
	ByNone   Dimension = ""
	ByChat   Dimension = "chat"
	ByModel  Dimension = "model"
	ByOrigin Dimension = "origin"
)

// Dimensions are the dimensions a query may group by.
var Dimensions = []Dimension{ByChat, ByModel, ByOrigin}

// Query asks for the sums of a period.
type Query struct {
	Period Period
	// By groups the sums (Report.Groups, Day.Groups); ByNone for none.
	By Dimension
	// Chat, when set, counts only that chat's records.
	Chat string
	// Daily adds a Day for each date of the period (zeros included), for a
	// chart.
	Daily bool
}

// Group is the sums of one value of the query's dimension.
type Group struct {
	Key string `json:"key"`
	Totals
}

// Day is one date's sums.
type Day struct {
	Date string `json:"date"`
	Totals
	Groups []Group `json:"groups,omitempty"`
}

// Report answers a Query.
type Report struct {
	Period   Period `json:"period"`
	Location string `json:"timezone"`
	Total    Totals `json:"total"`
	// Groups are ordered by cost (unpriced last), then calls, then key.
	Groups []Group `json:"groups,omitempty"`
	Days   []Day   `json:"days,omitempty"`
}

// groupKey is the finest grouping the ledger keeps per day.
type groupKey struct {
	Chat   string `json:"chat,omitempty"`
	Origin Origin `json:"origin"`
	Model  string `json:"model"`
}

func (k groupKey) value(d Dimension) string {
	switch d {
	case ByChat:
		return k.Chat
	case ByModel:
		return k.Model
	case ByOrigin:
		return string(k.Origin)
	}
	return ""
}

// dayAgg is one day's sums by group.
type dayAgg map[groupKey]*Totals

// sumDays answers q from the per-day sums (days by date).
func sumDays(days map[string]dayAgg, q Query, loc string) Report {
	rep := Report{Period: q.Period, Location: loc}
	groups := map[string]*Totals{}
	for _, date := range q.Period.Dates() {
		agg := days[date]
		day := Day{Date: date}
		dayGroups := map[string]*Totals{}
		for k, t := range agg {
			if q.Chat != "" && k.Chat != q.Chat {
				continue
			}
			day.Totals = day.Totals.Add(*t)
			if q.By != ByNone {
				v := k.value(q.By)
				for _, m := range []map[string]*Totals{groups, dayGroups} {
					g := m[v]
					if g == nil {
						g = &Totals{}
						m[v] = g
					}
					*g = g.Add(*t)
				}
			}
		}
		rep.Total = rep.Total.Add(day.Totals)
		if q.Daily {
			day.Groups = sortGroups(dayGroups)
			rep.Days = append(rep.Days, day)
		}
	}
	rep.Groups = sortGroups(groups)
	return rep
}

func sortGroups(m map[string]*Totals) []Group {
	if len(m) == 0 {
		return nil
	}
	out := make([]Group, 0, len(m))
	for k, t := range m {
		out = append(out, Group{Key: k, Totals: *t})
	}
	slices.SortFunc(out, func(a, b Group) int {
		if a.Cost.Known() != b.Cost.Known() {
			if a.Cost.Known() {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Cost.PricedNanos(), a.Cost.PricedNanos()), cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Key, b.Key))
	})
	return out
}
