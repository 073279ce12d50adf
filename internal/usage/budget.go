package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Limits are a daily and a monthly limit in USD; 0 is no limit.
type Limits struct {
	Daily   float64
	Monthly float64
}

func (l Limits) set() bool { return l.Daily > 0 || l.Monthly > 0 }

// Policy is the configured budget (budget:).
type Policy struct {
	// Limits hold for the whole daemon.
	Limits
	// PerChat holds for each chat on its own; Chats overrides it for
	// particular chats ("telegram:123").
	PerChat Limits
	Chats   map[string]Limits
	// Origins hold for all calls of one origin (the heartbeat, cron).
	Origins map[Origin]Limits
	// WarnAt is the share of a limit at which the owner is told, once per
	// limit and period (0.8); 0 never warns.
	WarnAt float64
	// Reroute is the cheaper route new calls move to at a limit; "" stops
	// them.
	Reroute string
}

// Verdict is what Check decides.
type Verdict uint8

const (
	// Allow: go ahead.
	Allow Verdict = iota
	// Stop: a limit is reached; Decision.Err is what to return.
	Stop
	// Reroute: a limit is reached; call Decision.Route instead.
	Reroute
)

// Hit is a limit reached (or, in a Warning, approached).
type Hit struct {
	Scope Scope
	// Monthly is true for the monthly limit, false for the daily one.
	Monthly bool
	Limit   float64
	Spent   Cost
	// ResetsAt is the next local midnight (of the 1st for a month).
	ResetsAt time.Time
}

// Decision is Check's answer.
type Decision struct {
	Verdict Verdict
	// Route is the route to call instead (Reroute).
	Route string
	// Hit is the limit that decided (Stop, Reroute).
	Hit Hit
	// Text is the sentence the chat reads at a Stop: which budget, when it
	// resets, where to look.
	Text string
}

// Err is the error a refused call returns (nil unless Stop): an
// *llm.BudgetError, which llm.Classify knows.
func (d Decision) Err() error {
	if d.Verdict != Stop {
		return nil
	}
	return &llm.BudgetError{Text: d.Text}
}

// Warning tells the owner a limit is near.
type Warning struct {
	Hit
	Text string
}

// BudgetOptions configure a Budget.
type BudgetOptions struct {
	// Dir holds budget.json (warnings given, the lift); "" keeps them in
	// memory only.
	Dir string
	// Notify tells the owner; called once per limit and period, outside
	// any lock, from the goroutine that recorded the call.
	Notify func(Warning)
	Log    *zap.Logger
}

// Budget decides whether a new model call may run (see the package doc).
// It is safe for concurrent use.
type Budget struct {
	policy Policy
	ledger Reader
	opts   BudgetOptions

	mu    sync.Mutex
	state budgetState
}

// budgetState is budget.json.
type budgetState struct {
	// LiftedUntil is when a lift ends (local midnight); zero for none.
	LiftedUntil time.Time `json:"lifted_until,omitzero"`
	// Warned are the warnings given: limit key + period.
	Warned []string `json:"warned,omitempty"`
}

const budgetFile = "budget.json"

// NewBudget returns the budget of policy over the ledger's spend, reading
// budget.json from opts.Dir.
func NewBudget(policy Policy, ledger Reader, opts BudgetOptions) (*Budget, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	b := &Budget{policy: policy, ledger: ledger, opts: opts}
	if opts.Dir == "" {
		return b, nil
	}
	raw, err := os.ReadFile(filepath.Join(opts.Dir, budgetFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("budget state: %w", err)
	default:
		if err := json.Unmarshal(raw, &b.state); err != nil {
			// A damaged state file forgets a lift and may repeat a
			// warning; it never stops the daemon.
			opts.Log.Warn("budget state does not decode; starting without lifts or warnings", zap.Error(err))
			b.state = budgetState{}
		}
	}
	return b, nil
}

// Policy is the budget's configuration.
func (b *Budget) Policy() Policy { return b.policy }

// limit is one configured limit of one scope.
type limit struct {
	scope   Scope
	monthly bool
	usd     float64
}

// limitsFor lists the limits that hold for call c, daemon first.
func (b *Budget) limitsFor(c Call) []limit {
	var out []limit
	add := func(s Scope, l Limits) {
		if l.Daily > 0 {
			out = append(out, limit{scope: s, usd: l.Daily})
		}
		if l.Monthly > 0 {
			out = append(out, limit{scope: s, monthly: true, usd: l.Monthly})
		}
	}
	add(Scope{}, b.policy.Limits)
	if c.Chat != "" {
		l, ok := b.policy.Chats[c.Chat]
		if !ok {
			l = b.policy.PerChat
		}
		add(Scope{Chat: c.Chat}, l)
	}
	if l, ok := b.policy.Origins[c.Origin]; ok {
		add(Scope{Origin: c.Origin}, l)
	}
	return out
}

// Check decides whether a new call of c may run now. Unpriced calls count
// nothing against a limit (there is no price to count).
func (b *Budget) Check(c Call) Decision {
	if b == nil {
		return Decision{}
	}
	now := b.ledger.Now()
	if until, ok := b.Lifted(); ok && now.Before(until) {
		return Decision{}
	}
	for _, l := range b.limitsFor(c) {
		sp := b.ledger.Spent(l.scope)
		spent := sp.Day
		if l.monthly {
			spent = sp.Month
		}
		if spent.PricedNanos() < USD(l.usd).PricedNanos() {
			continue
		}
		hit := Hit{Scope: l.scope, Monthly: l.monthly, Limit: l.usd, Spent: spent, ResetsAt: b.resetsAt(now, l.monthly)}
		if b.policy.Reroute != "" {
			return Decision{Verdict: Reroute, Route: b.policy.Reroute, Hit: hit}
		}
		return Decision{Verdict: Stop, Hit: hit, Text: b.stopText(hit)}
	}
	return Decision{}
}

// Admit checks the call ctx carries (see WithCall) unless it was admitted
// already, and returns ctx marked admitted when it may run, so the calls
// of a running turn are not stopped halfway.
func (b *Budget) Admit(ctx context.Context) (context.Context, Decision) {
	c, _ := CallFrom(ctx)
	if b == nil || c.Admitted {
		return ctx, Decision{}
	}
	d := b.Check(c)
	if d.Verdict == Stop {
		return ctx, d
	}
	c.Admitted, c.Reroute = true, d.Route
	return WithCall(ctx, c), d
}

// Lift lets every call through until the next local midnight, and
// returns that time.
func (b *Budget) Lift() (time.Time, error) {
	until := b.resetsAt(b.ledger.Now(), false)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.LiftedUntil = until
	return until, b.saveLocked()
}

// Lifted is when the current lift ends, if one holds.
func (b *Budget) Lifted() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.state.LiftedUntil
	return u, !u.IsZero() && b.ledger.Now().Before(u)
}

// Observe warns the owner once when a record brings a limit's spend past
// WarnAt of it; the ledger calls it after each record (Ledger.OnRecord).
func (b *Budget) Observe(r Record) {
	if b == nil || b.policy.WarnAt <= 0 || b.opts.Notify == nil {
		return
	}
	now := b.ledger.Now()
	loc := b.ledger.Location()
	var warn []Warning
	for _, l := range b.limitsFor(Call{Origin: r.Origin, Chat: r.Chat}) {
		sp := b.ledger.Spent(l.scope)
		spent, period := sp.Day, Today(now, loc).From
		if l.monthly {
			spent, period = sp.Month, now.In(loc).Format("2006-01")
		}
		if float64(spent.PricedNanos()) < b.policy.WarnAt*float64(USD(l.usd).PricedNanos()) {
			continue
		}
		key := fmt.Sprintf("%s|%s|%v|%s", l.scope.Chat, l.scope.Origin, l.monthly, period)
		if !b.markWarned(key) {
			continue
		}
		hit := Hit{Scope: l.scope, Monthly: l.monthly, Limit: l.usd, Spent: spent, ResetsAt: b.resetsAt(now, l.monthly)}
		warn = append(warn, Warning{Hit: hit, Text: b.warnText(hit)})
	}
	for _, w := range warn {
		b.opts.Notify(w)
	}
}

// markWarned records key and reports whether it is new.
func (b *Budget) markWarned(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Contains(b.state.Warned, key) {
		return false
	}
	b.state.Warned = append(b.state.Warned, key)
	// Warnings of past periods are never asked about again; keep the list
	// short.
	if n := len(b.state.Warned); n > 64 {
		b.state.Warned = slices.Clone(b.state.Warned[n-64:])
	}
	if err := b.saveLocked(); err != nil {
		b.opts.Log.Warn("cannot save the budget state; a warning may repeat after a restart", zap.Error(err))
	}
	return true
}

func (b *Budget) saveLocked() error {
	if b.opts.Dir == "" {
		return nil
	}
	raw, err := json.Marshal(b.state)
	if err != nil {
		return fmt.Errorf("budget state: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(b.opts.Dir, budgetFile), raw, 0o600); err != nil {
		return fmt.Errorf("budget state: %w", err)
	}
	return nil
}

// resetsAt is the next local midnight after now, or the first of next
// month's.
func (b *Budget) resetsAt(now time.Time, monthly bool) time.Time {
	t := now.In(b.ledger.Location())
	if monthly {
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
	}
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
}

// what names a hit's budget: "today's budget", "this chat's monthly
// budget", "the heartbeat's daily budget".
func what(h Hit) string {
	switch {
	case h.Scope.Chat != "" && h.Monthly:
		return "this chat's budget for the month"
	case h.Scope.Chat != "":
		return "this chat's budget for today"
	case h.Scope.Origin != "" && h.Monthly:
		return "the " + string(h.Scope.Origin) + " budget for the month"
	case h.Scope.Origin != "":
		return "the " + string(h.Scope.Origin) + " budget for today"
	case h.Monthly:
		return "this month's budget"
	}
	return "today's budget"
}

// when is the reset time as the chat reads it.
func when(h Hit) string {
	zone := h.ResetsAt.Location().String()
	if h.Monthly {
		return "on " + h.ResetsAt.Format("2 January") + " at 00:00 " + zone
	}
	return "at 00:00 " + zone
}

// stopText is the sentence of a Stop: "today's budget of $2 is spent; it
// resets at 00:00 Europe/Berlin; /usage shows where it went."
func (b *Budget) stopText(h Hit) string {
	return fmt.Sprintf("%s of %s is spent; it resets %s; /usage shows where it went.", what(h), FormatUSD(h.Limit), when(h))
}

// warnText is the owner's warning.
func (b *Budget) warnText(h Hit) string {
	return fmt.Sprintf("💸 %s: %s of %s is spent (%.0f%%). At the limit new model calls stop until it resets %s; /usage shows where it went, /budget lift lifts it for today.",
		capital(what(h)), h.Spent, FormatUSD(h.Limit), 100*h.Spent.PricedUSD()/h.Limit, when(h))
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
