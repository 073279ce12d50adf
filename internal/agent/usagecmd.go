package agent

import (
	"fmt"
	"strings"
	"sync"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// usageAnswer answers /usage: this chat's calls, tokens and cost today,
// this week and this month, from the ledger (no model call); for the
// owner the whole daemon's too and the top chats, origins and models of
// the month. "/usage footer on|off" sets the footer of this chat's
// answers.
func (a *Agent) usageAnswer(m bus.InboundMessage, args string) (string, error) {
	if f, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(args)), "footer"); ok {
		return a.setFooter(m.Key(), strings.TrimSpace(f))
	}
	if args != "" {
		return "Usage: /usage shows what this chat used; /usage footer on|off adds a line of tokens and cost under each answer.", nil
	}
	if a.usage == nil {
		return "This process keeps no usage ledger, so I cannot say what was used.", nil
	}
	now, loc := a.usage.Now(), a.usage.Location()
	periods := []struct {
		name   string
		period usage.Period
	}{
		{"Today", usage.Today(now, loc)},
		{"This week", usage.Week(now, loc)},
		{"This month", usage.Month(now, loc)},
	}
	// The chat as turnCall names it in the records.
	chat := usage.ChatOf(m.Key())
	owner := a.owner != nil && a.owner(m)
	var b strings.Builder
	fmt.Fprintf(&b, "Usage of this chat (days in %s):\n", loc)
	for _, p := range periods {
		rep, err := a.usage.Query(usage.Query{Period: p.period, Chat: chat})
		if err != nil {
			return "I could not read the usage ledger; see the daemon log.", fmt.Errorf("usage: %w", err)
		}
		fmt.Fprintf(&b, "%s: %s\n", p.name, UsageLine(rep.Total))
	}
	if owner {
		b.WriteString("\nThe whole daemon:\n")
		for _, p := range periods {
			rep, err := a.usage.Query(usage.Query{Period: p.period})
			if err != nil {
				return "I could not read the usage ledger; see the daemon log.", fmt.Errorf("usage: %w", err)
			}
			fmt.Fprintf(&b, "%s: %s\n", p.name, UsageLine(rep.Total))
		}
		month := periods[2].period
		for _, d := range []struct {
			by   usage.Dimension
			name string
		}{{usage.ByChat, "chats"}, {usage.ByOrigin, "origins"}, {usage.ByModel, "models"}} {
			rep, err := a.usage.Query(usage.Query{Period: month, By: d.by})
			if err != nil {
				return "I could not read the usage ledger; see the daemon log.", fmt.Errorf("usage: %w", err)
			}
			if len(rep.Groups) == 0 {
				continue
			}
			fmt.Fprintf(&b, "Top %s this month:\n", d.name)
			for _, g := range rep.Groups[:min(topGroups, len(rep.Groups))] {
				key := g.Key
				if key == "" {
					key = "(none)"
				}
				fmt.Fprintf(&b, "• %s: %s, %s, %s tokens\n", key, g.Cost, calls(g.Calls), thousands(int(g.Tokens())))
			}
		}
	}
	b.WriteString("Costs are the configured prices (docs/usage.md); \"unpriced\" means a model without a price was used.")
	return b.String(), nil
}

// spentToday is /status's line of today's spend: this chat's, and for
// the owner the whole daemon's; "" without a ledger.
func (a *Agent) spentToday(m bus.InboundMessage) (string, error) {
	if a.usage == nil {
		return "", nil
	}
	today := usage.Today(a.usage.Now(), a.usage.Location())
	mine, err := a.usage.Query(usage.Query{Period: today, Chat: usage.ChatOf(m.Key())})
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("Spent today in this chat: %s (%s)", costText(mine.Total.Cost), calls(mine.Total.Calls))
	if a.owner != nil && a.owner(m) {
		all, err := a.usage.Query(usage.Query{Period: today})
		if err != nil {
			return "", err
		}
		line += fmt.Sprintf("; the whole daemon: %s (%s)", costText(all.Total.Cost), calls(all.Total.Calls))
	}
	return line + "; /usage says more", nil
}

// topGroups is how many chats, origins and models /usage lists.
const topGroups = 5

// UsageLine is one period's totals as every surface writes them: calls,
// tokens in (of them from the cache), out, and the cost or "unpriced".
func UsageLine(t usage.Totals) string {
	if t.Calls == 0 {
		return "no model calls"
	}
	in := t.Input + t.CacheRead + t.CacheWrite
	s := fmt.Sprintf("%s, %s tokens in", calls(t.Calls), thousands(int(in)))
	if t.CacheRead > 0 {
		s += fmt.Sprintf(" (%s cached)", thousands(int(t.CacheRead)))
	}
	s += fmt.Sprintf(", %s out, %s", thousands(int(t.Output)), costText(t.Cost))
	if t.Estimated > 0 {
		s += fmt.Sprintf(" (%s estimated)", calls(t.Estimated))
	}
	return s
}

func calls(n int64) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
}

// costText is the cost, or "unpriced" with what of it is priced.
func costText(c usage.Cost) string {
	if c.Known() {
		return c.String()
	}
	if c.PricedNanos() > 0 {
		return fmt.Sprintf("unpriced (%s of a model without a price; the rest %s)", calls(c.UnpricedCalls()), usage.FormatUSD(c.PricedUSD()))
	}
	return "unpriced"
}

// setFooter answers "/usage footer [on|off]", keeping the choice in the
// session's metadata as /model keeps the route.
func (a *Agent) setFooter(key, arg string) (string, error) {
	var on bool
	switch arg {
	case "on":
		on = true
	case "off":
	case "":
		snap, err := a.store.Get(key)
		if err != nil {
			return "I could not read this session's state; see the daemon log.", fmt.Errorf("usage footer: %w", err)
		}
		state := "off"
		if snap.Footer {
			state = "on"
		}
		return "The usage footer is " + state + " in this chat; /usage footer on|off changes it.", nil
	default:
		return "Usage: /usage footer on|off", nil
	}
	if err := a.store.SetMeta(key, session.MetaUpdate{Footer: &on}); err != nil {
		return "I could not save the footer choice; see the daemon log.", fmt.Errorf("usage footer: %w", err)
	}
	if on {
		return "Each answer in this chat now ends with its tokens and cost.", nil
	}
	return "The usage footer is off in this chat.", nil
}

// turnSpend sums the ledger's records of the turns that show a footer,
// by session key: the daemon feeds every record to Agent.UsageRecorded, so
// the footer adds up exactly what the ledger holds for the turn (retried
// and failed attempts included), not a second count of its own.
type turnSpend struct {
	mu   sync.Mutex
	open map[string]*usage.Totals
}

func (s *turnSpend) start(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[string]*usage.Totals{}
	}
	s.open[key] = &usage.Totals{}
}

// end returns the turn's sums and stops counting.
func (s *turnSpend) end(key string) usage.Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.open[key]
	delete(s.open, key)
	if t == nil {
		return usage.Totals{}
	}
	return *t
}

// add counts r if a turn of its session is open and r is the turn's own
// call: not a consolidation or a subagent, which run beside turns with
// origins of their own.
func (s *turnSpend) add(r usage.Record) {
	if r.Session == "" || r.Origin == usage.OriginConsolidation || r.Origin == usage.OriginSubagent {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.open[r.Session]
	if t == nil {
		return
	}
	one := usage.Totals{Calls: 1, Input: int64(r.Tokens.InputTokens), Output: int64(r.Tokens.OutputTokens),
		CacheRead: int64(r.Tokens.CacheReadTokens), CacheWrite: int64(r.Tokens.CacheWriteTokens),
		Reasoning: int64(r.Tokens.ReasoningTokens), Cost: r.Cost}
	if r.Outcome != usage.OutcomeOK {
		one.Failed = 1
	}
	if r.Estimated {
		one.Estimated = 1
	}
	*t = t.Add(one)
}

// UsageRecorded is told of every record the usage ledger adds (the daemon
// registers it with Ledger.OnRecord), for the footers of running turns.
// It is cheap and safe for concurrent use.
func (a *Agent) UsageRecorded(r usage.Record) { a.spend.add(r) }

// footer is the line under an answer: what its turn's calls used.
func footer(t usage.Totals) string {
	return "\n\n— " + UsageLine(t)
}
