package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// usageLedger opens a ledger in a temporary directory whose clock stands
// at now, in UTC days.
func usageLedger(t *testing.T, now time.Time) *usage.Ledger {
	t.Helper()
	l, err := usage.Open(t.TempDir(), usage.Options{Clock: clock.Func(func() time.Time { return now }), Prices: usage.NewPriceTable(nil),
		Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func record(t *testing.T, l *usage.Ledger, at time.Time, chat string, origin usage.Origin, model string, in, out int) {
	t.Helper()
	prov, id, _ := strings.Cut(model, "/")
	if err := l.Record(context.Background(), usage.Record{Time: at, Chat: chat, Session: chat, Origin: origin, Provider: prov, Model: id,
		Tokens: llm.Usage{InputTokens: in, OutputTokens: out}, Outcome: usage.OutcomeOK}); err != nil {
		t.Fatal(err)
	}
}

// /usage answers from the ledger without a model call: this chat's today,
// week and month as the ledger sums them; the owner also gets the whole
// daemon and the month's top chats, origins and models, and nobody else
// sees another chat's name.
func TestUsageAnswersFromTheLedger(t *testing.T) {
	now := time.Date(2026, 3, 11, 15, 0, 0, 0, time.UTC) // a Wednesday
	l := usageLedger(t, now)
	record(t, l, now, "test:c1", usage.OriginTurn, "openai/gpt-4o-mini", 1_000_000, 1000) // today
	record(t, l, now.AddDate(0, 0, -1), "test:c1", usage.OriginTurn, "openai/gpt-4o-mini", 2000, 10)
	record(t, l, now.AddDate(0, 0, -9), "test:c1", usage.OriginTurn, "openai/gpt-4o-mini", 3000, 10) // last week
	record(t, l, now, "test:other", usage.OriginHeartbeat, "anthropic/claude-haiku-4-5", 5000, 500)
	record(t, l, now, "test:other", usage.OriginCron, "ollama/llama3", 100, 10) // unpriced
	h := newHarnessDeps(t, func(d *Deps) {
		d.Usage = l
		d.Owner = func(m bus.InboundMessage) bool { return m.ChatID == "owner" }
	})
	total := func(q usage.Query) string {
		rep, err := l.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		return UsageLine(rep.Total)
	}
	mine := h.command("c1", "/usage")
	for _, want := range []string{
		"Today: " + total(usage.Query{Period: usage.Today(now, time.UTC), Chat: "test:c1"}),
		"This week: " + total(usage.Query{Period: usage.Week(now, time.UTC), Chat: "test:c1"}),
		"This month: " + total(usage.Query{Period: usage.Month(now, time.UTC), Chat: "test:c1"}),
		"Today: 1 call, 1,000,000 tokens in, 1,000 out, $0.15",
		"This week: 2 calls, 1,002,000 tokens in, 1,010 out,",
	} {
		if !strings.Contains(mine, want) {
			t.Errorf("/usage lacks %q:\n%s", want, mine)
		}
	}
	if strings.Contains(mine, "test:other") || strings.Contains(mine, "whole daemon") {
		t.Errorf("/usage shows a non-owner other chats:\n%s", mine)
	}
	all := h.command("owner", "/usage")
	for _, want := range []string{
		"The whole daemon:\nToday: " + total(usage.Query{Period: usage.Today(now, time.UTC)}),
		"unpriced (1 call of a model without a price; the rest ",
		"Top chats this month:\n• test:c1: ",
		"• test:other: unpriced, 2 calls",
		"Top origins this month:\n• turn: ",
		"• heartbeat: ",
		"Top models this month:\n• openai/gpt-4o-mini: ",
		"• ollama/llama3: unpriced, 1 call, 110 tokens",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the owner's /usage lacks %q:\n%s", want, all)
		}
	}
	if n := len(h.script.Requests()); n != 0 {
		t.Errorf("/usage made %d model calls", n)
	}
	if got := h.command("c1", "/status"); !strings.Contains(got, "Spent today in this chat: $0.15 (1 call); /usage says more") {
		t.Errorf("/status lacks today's spend:\n%s", got)
	}
	if got := h.command("owner", "/status"); !strings.Contains(got, "Spent today in this chat: $0 (0 calls); the whole daemon: unpriced (1 call of a model without a price; the rest ") {
		t.Errorf("the owner's /status lacks the daemon's spend:\n%s", got)
	}
	if got := h.command("c2", "/usage"); !strings.Contains(got, "Today: no model calls") {
		t.Errorf("/usage of a chat without calls:\n%s", got)
	}
}

// recordingModel stands in for the router's recording: each call it
// answers is recorded in the ledger for session key.
type recordingModel struct {
	Model
	ledger *usage.Ledger
	key    string
}

func (m recordingModel) Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
	msg, err := m.Model.Complete(ctx, route, req, onDelta)
	r := usage.Record{Session: m.key, Chat: m.key, Origin: usage.OriginTurn, Provider: "openai", Model: "gpt-4o-mini", Outcome: usage.OutcomeOK}
	if err != nil {
		r.Outcome = usage.OutcomeFailed
	} else {
		r.Tokens = msg.Meta.Usage
	}
	if rerr := m.ledger.Record(ctx, r); rerr != nil {
		panic(rerr)
	}
	return msg, err
}

// "/usage footer on" is kept with the session, like /model's route, and
// each answer then ends with what its turn's calls used as the ledger
// counted them; "off" takes the line away.
func TestUsageFooter(t *testing.T) {
	now := time.Date(2026, 3, 11, 15, 0, 0, 0, time.UTC)
	l := usageLedger(t, now)
	var ag *Agent
	l.OnRecord(func(r usage.Record) { ag.UsageRecorded(r) })
	h := newHarnessDeps(t, func(d *Deps) {
		d.Model = recordingModel{Model: d.Model, ledger: l, key: "test:c1"}
		d.Usage = l
	})
	ag = h.agent
	if got := h.command("c1", "/usage footer"); !strings.Contains(got, "footer is off") {
		t.Errorf("/usage footer = %q", got)
	}
	if got := h.command("c1", "/usage footer on"); !strings.Contains(got, "now ends with its tokens and cost") {
		t.Errorf("/usage footer on = %q", got)
	}
	if snap, err := h.store.Get("test:c1"); err != nil || !snap.Footer {
		t.Fatalf("footer not kept in the session: %v %v", snap.Footer, err)
	}
	h.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "a", Name: "list_dir", Args: `{"path":"."}`}}, InputTokens: 1000, OutputTokens: 20},
		fakellm.Reply{Text: "Here it is.", InputTokens: 1100, OutputTokens: 30, CachedTokens: 900})
	h.send("c1", "list the workspace")
	finals := h.waitFinals("c1", 1)
	rep, err := l.Query(usage.Query{Period: usage.Today(now, time.UTC), Chat: "test:c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := "Here it is.\n\n— " + UsageLine(rep.Total)
	if finals[0].Content != want || rep.Total.Calls != 2 {
		t.Errorf("answer = %q, want %q (the ledger's %d calls)", finals[0].Content, want, rep.Total.Calls)
	}
	h.command("c1", "/usage footer off")
	h.script.Push(fakellm.Reply{Text: "Plain."})
	h.send("c1", "again")
	if finals := h.waitFinals("c1", 2); finals[1].Content != "Plain." {
		t.Errorf("answer with the footer off = %q", finals[1].Content)
	}
}
