package daemon

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/web"
)

// usageTally counts the tokens each provider/model used today (local
// time) and since the gateway started, for the control panel.
type usageTally struct {
	now func() time.Time

	mu    sync.Mutex
	day   string
	today map[string]*[2]int // model → input, output
	total map[string]*[2]int
}

func newUsageTally(now func() time.Time) *usageTally {
	return &usageTally{now: now, today: map[string]*[2]int{}, total: map[string]*[2]int{}}
}

// record adds an answered call's usage.
func (u *usageTally) record(msg llm.Message) {
	if msg.Meta == nil {
		return
	}
	model := strings.Trim(msg.Meta.Provider+"/"+msg.Meta.Model, "/")
	in, out := msg.Meta.Usage.InputTokens, msg.Meta.Usage.OutputTokens
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollLocked()
	for _, m := range []map[string]*[2]int{u.today, u.total} {
		c, ok := m[model]
		if !ok {
			c = &[2]int{}
			m[model] = c
		}
		c[0] += in
		c[1] += out
	}
}

// rollLocked starts a new day's counts at local midnight.
func (u *usageTally) rollLocked() {
	if d := u.now().Format(time.DateOnly); d != u.day {
		u.day = d
		clear(u.today)
	}
}

// snapshot returns every model's counts, by name.
func (u *usageTally) snapshot() []web.ModelUsage {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollLocked()
	out := make([]web.ModelUsage, 0, len(u.total))
	for model, t := range u.total {
		m := web.ModelUsage{Model: model, TotalInput: t[0], TotalOutput: t[1]}
		if d, ok := u.today[model]; ok {
			m.TodayInput, m.TodayOutput = d[0], d[1]
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b web.ModelUsage) int { return strings.Compare(a.Model, b.Model) })
	return out
}
