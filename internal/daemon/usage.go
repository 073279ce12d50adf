package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/metrics"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// openUsage opens the usage ledger in usage.dir and the budget over it
// (docs/usage.md). The metrics count what the ledger records, so the two
// agree; the budget's warnings go to the owner's chat through warn.
func openUsage(cfg *config.Config, m *metrics.Metrics, warn *ownerWarnings, log *zap.Logger) (*usage.Ledger, *usage.Budget, error) {
	loc, err := usage.Zone(cfg.Budget.Timezone)
	if err != nil {
		return nil, nil, err
	}
	prices := make(map[string]usage.Price, len(cfg.Prices))
	for k, p := range cfg.Prices {
		prices[k] = usage.Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, PerMinute: p.PerMinute}
	}
	ledger, err := usage.Open(cfg.Usage.Dir, usage.Options{
		Location: loc, Retention: cfg.Usage.Retention, SyncEvery: cfg.Usage.SyncEvery,
		Prices: usage.NewPriceTable(prices), Log: log,
	})
	if err != nil {
		return nil, nil, err
	}
	budget, err := usage.NewBudget(budgetPolicy(cfg.Budget), ledger, usage.BudgetOptions{Dir: cfg.Usage.Dir, Notify: warn.notify, Log: log})
	if err != nil {
		_ = ledger.Close()
		return nil, nil, err
	}
	ledger.OnRecord(func(r usage.Record) {
		m.UsageRecorded(r.ModelKey(), string(r.Origin), string(r.Outcome), r.Tokens, r.Cost.PricedUSD(), r.Cost.Known())
	})
	ledger.OnRecord(budget.Observe)
	return ledger, budget, nil
}

// budgetPolicy is budget: as internal/usage reads it.
func budgetPolicy(b config.BudgetConfig) usage.Policy {
	lim := func(l config.LimitsConfig) usage.Limits { return usage.Limits{Daily: l.Daily, Monthly: l.Monthly} }
	p := usage.Policy{
		Limits: usage.Limits{Daily: b.Daily, Monthly: b.Monthly}, PerChat: lim(b.PerChat),
		WarnAt: b.WarnAt, Reroute: b.Reroute,
	}
	if len(b.Chats) > 0 {
		p.Chats = make(map[string]usage.Limits, len(b.Chats))
		for k, l := range b.Chats {
			p.Chats[k] = lim(l)
		}
	}
	if len(b.Origins) > 0 {
		p.Origins = make(map[usage.Origin]usage.Limits, len(b.Origins))
		for k, l := range b.Origins {
			p.Origins[usage.Origin(k)] = lim(l)
		}
	}
	return p
}

// ownerChat is the chat the budget's warnings go to: budget.owner, else
// the private chat of the first user of allow_from of the first enabled
// channel that can write to a user by id (channels.Kind.DirectChat: a
// Telegram user's id is their private chat's); "" when none says (the
// warnings are then only logged).
func ownerChat(cfg *config.Config) (channel, chatID string) {
	if c, id, ok := strings.Cut(cfg.Budget.Owner, ":"); ok {
		return c, id
	}
	for _, k := range kinds.All {
		if k.DirectChat == nil || !k.Enabled(cfg) {
			continue
		}
		for _, id := range k.Access(cfg).AllowFrom {
			if id != "*" && id != "" {
				return k.Name, k.DirectChat(id).ID
			}
		}
	}
	return "", ""
}

// ownerWarnings carries the budget's warnings to the owner's chat. The
// budget calls notify from the goroutine that recorded a model call, which
// must not wait on a full bus; Run publishes them.
type ownerWarnings struct {
	pub             Publisher
	channel, chatID string
	log             *zap.Logger

	mu      sync.Mutex
	pending []usage.Warning
	wake    chan struct{}
}

func newOwnerWarnings(cfg *config.Config, log *zap.Logger) *ownerWarnings {
	ch, id := ownerChat(cfg)
	return &ownerWarnings{channel: ch, chatID: id, log: log, wake: make(chan struct{}, 1)}
}

func (w *ownerWarnings) notify(warn usage.Warning) {
	w.log.Warn("usage budget warning", zap.String("warning", warn.Text), zap.String("owner", w.channel+":"+w.chatID))
	if w.chatID == "" {
		return
	}
	w.mu.Lock()
	if len(w.pending) < 16 { // a handful per period at most: one per limit
		w.pending = append(w.pending, warn)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run publishes the warnings until ctx ends.
func (w *ownerWarnings) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		}
		w.mu.Lock()
		todo := w.pending
		w.pending = nil
		w.mu.Unlock()
		for _, warn := range todo {
			err := w.pub.PublishOutbound(ctx, bus.OutboundMessage{Channel: w.channel, ChatID: w.chatID, Kind: bus.KindMessage, Content: warn.Text})
			if err != nil {
				w.log.Warn("cannot tell the owner about the budget", zap.Error(err))
			}
		}
	}
}

// budgetStatus is /budget's answer: today's and the month's spend against
// the limits, and a lift if one holds.
func budgetStatus(l usage.Reader, b *usage.Budget) string {
	p := b.Policy()
	sp := l.Spent(usage.Scope{})
	var lines []string
	limit := func(v float64) string {
		if v <= 0 {
			return "no limit"
		}
		return "limit " + usage.FormatUSD(v)
	}
	lines = append(lines, fmt.Sprintf("Spent today: %s (%s)", sp.Day, limit(p.Daily)),
		fmt.Sprintf("Spent this month: %s (%s)", sp.Month, limit(p.Monthly)))
	if until, ok := b.Lifted(); ok {
		lines = append(lines, "Lifted until "+until.Format("15:04 MST")+".")
	}
	lines = append(lines, "Days end at 00:00 "+l.Location().String()+". /budget lift lifts the limits until then; /usage shows where it went.")
	return strings.Join(lines, "\n")
}

// liftBudget is /budget lift.
func liftBudget(b *usage.Budget) string {
	until, err := b.Lift()
	if err != nil {
		return "⚠️ The budget is lifted until " + until.Format("15:04 MST") + ", but the lift could not be saved: a restart forgets it."
	}
	return "✅ The budget is lifted until " + until.Format("15:04 MST") + " (midnight): model calls run past today's limits until then."
}

// budgetCommand answers /budget and /budget lift (internal/commands).
type budgetCommand struct {
	core  *Core
	links *webLinks
}

func (b *budgetCommand) answer(m bus.InboundMessage) string {
	arg := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(m.Content), "/budget")))
	if i := strings.IndexByte(arg, '@'); i == 0 { // "/budget@bot lift"
		_, arg, _ = strings.Cut(arg, " ")
		arg = strings.TrimSpace(arg)
	}
	switch arg {
	case "":
		return budgetStatus(b.core.Usage, b.core.Budget)
	case "lift":
		if !b.owner(m) {
			return "Only the owner (a user listed by name in allow_from, approved by pairing, or the web page) can lift the budget."
		}
		return liftBudget(b.core.Budget)
	}
	return "Write /budget to see the spend, or /budget lift to lift the limits until midnight."
}

// owner reports whether m's sender may lift the budget (isOwner).
func (b *budgetCommand) owner(m bus.InboundMessage) bool { return isOwner(b.links, m) }

// usageMeter is what the channels' transcription client counts into and is
// admitted by: the core's recorder and budget.
type usageMeter struct {
	usage.Recorder
	budget *usage.Budget
}

func (m usageMeter) Admit(ctx context.Context) (context.Context, usage.Decision) {
	return m.budget.Admit(ctx)
}

// meter is the channels' transcription meter.
func (c *Core) meter() channels.Meter {
	return usageMeter{Recorder: c.recorder, budget: c.Budget}
}

// workerName names this process among those sharing the NATS bus, in the
// usage records it publishes: host, role and pid.
func workerName(role string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%s/%d", host, role, os.Getpid())
}
