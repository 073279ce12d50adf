package usage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestBudgetStopsAtTheLimitWithAClearAnswer(t *testing.T) {
	loc := berlin(t)
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 15, 0, 0, 0, loc)}
	l := openLedger(t, dir, c, loc)
	b, err := NewBudget(Policy{Limits: Limits{Daily: 2, Monthly: 50}}, l, BudgetOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithCall(context.Background(), Call{Origin: OriginTurn, Chat: "telegram:1"})
	if _, d := b.Admit(ctx); d.Verdict != Allow {
		t.Fatalf("fresh budget: %+v", d)
	}
	// $2.00 exactly: gpt-4o output at $10/M.
	_ = l.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o", 0, 200_000))
	_, d := b.Admit(ctx)
	want := "today's budget of $2 is spent; it resets at 00:00 Europe/Berlin; /usage shows where it went."
	if d.Verdict != Stop || d.Text != want {
		t.Fatalf("at the limit: %+v, want Stop %q", d, want)
	}
	var be *llm.BudgetError
	if !errors.As(d.Err(), &be) || llm.Classify(d.Err()).Kind != llm.KindBudget || llm.Classify(d.Err()).UserText() != "⚠️ "+want {
		t.Errorf("Err() = %v, classified %+v", d.Err(), llm.Classify(d.Err()))
	}
	// A call of a turn admitted before the limit runs on.
	admitted := WithCall(context.Background(), Call{Origin: OriginTurn, Chat: "telegram:1", Admitted: true})
	if _, d := b.Admit(admitted); d.Verdict != Allow {
		t.Errorf("admitted turn stopped: %+v", d)
	}
	// The owner lifts it until midnight Berlin; the lift survives a restart.
	until, err := b.Lift()
	if err != nil || !until.Equal(time.Date(2026, 3, 11, 0, 0, 0, 0, loc)) {
		t.Fatalf("Lift = %s, %v", until, err)
	}
	b2, _ := NewBudget(Policy{Limits: Limits{Daily: 2}}, l, BudgetOptions{Dir: dir})
	if _, d := b2.Admit(ctx); d.Verdict != Allow {
		t.Errorf("lifted: %+v", d)
	}
	c.Set(time.Date(2026, 3, 11, 0, 0, 1, 0, loc)) // a new day: spend 0, lift over
	if _, ok := b2.Lifted(); ok {
		t.Error("lift outlived its day")
	}
	if _, d := b2.Admit(ctx); d.Verdict != Allow {
		t.Errorf("new day: %+v", d)
	}
}

func TestBudgetScopes(t *testing.T) {
	c := &setClock{t: time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)}
	l := openLedger(t, t.TempDir(), c, time.UTC)
	b, _ := NewBudget(Policy{
		PerChat: Limits{Daily: 1},
		Chats:   map[string]Limits{"telegram:vip": {Daily: 100}},
		Origins: map[Origin]Limits{OriginHeartbeat: {Monthly: 0.5}},
	}, l, BudgetOptions{})
	ctx := context.Background()
	_ = l.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o", 0, 100_000))   // $1 in chat 1
	_ = l.Record(ctx, rec("telegram:vip", OriginTurn, "openai/gpt-4o", 0, 100_000)) // $1 in vip
	_ = l.Record(ctx, rec("", OriginHeartbeat, "openai/gpt-4o", 0, 50_000))         // $0.50 heartbeat
	tests := []struct {
		call Call
		want Verdict
		text string
	}{
		{Call{Origin: OriginTurn, Chat: "telegram:1"}, Stop, "this chat's budget for today of $1 is spent; it resets at 00:00 UTC; /usage shows where it went."},
		{Call{Origin: OriginTurn, Chat: "telegram:2"}, Allow, ""},
		{Call{Origin: OriginTurn, Chat: "telegram:vip"}, Allow, ""},
		{Call{Origin: OriginHeartbeat}, Stop, "the heartbeat budget for the month of $0.50 is spent; it resets on 1 February at 00:00 UTC; /usage shows where it went."},
		{Call{Origin: OriginCron}, Allow, ""},
	}
	for _, tt := range tests {
		d := b.Check(tt.call)
		if d.Verdict != tt.want || d.Text != tt.text {
			t.Errorf("%+v: %v %q, want %v %q", tt.call, d.Verdict, d.Text, tt.want, tt.text)
		}
	}
	rb, _ := NewBudget(Policy{PerChat: Limits{Daily: 1}, Reroute: "cheap"}, l, BudgetOptions{})
	if d := rb.Check(Call{Chat: "telegram:1"}); d.Verdict != Reroute || d.Route != "cheap" {
		t.Errorf("reroute: %+v", d)
	}
}

func TestBudgetWarnsOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	l := openLedger(t, dir, c, time.UTC)
	var mu sync.Mutex
	var got []string
	notify := func(w Warning) { mu.Lock(); defer mu.Unlock(); got = append(got, w.Text) }
	b, _ := NewBudget(Policy{Limits: Limits{Daily: 1}, WarnAt: 0.8}, l, BudgetOptions{Dir: dir, Notify: notify})
	l.OnRecord(b.Observe)
	ctx := context.Background()
	_ = l.Record(ctx, rec("a", OriginTurn, "openai/gpt-4o", 0, 70_000)) // $0.70: below the mark
	_ = l.Record(ctx, rec("a", OriginTurn, "openai/gpt-4o", 0, 10_000)) // $0.80: at it
	_ = l.Record(ctx, rec("a", OriginTurn, "openai/gpt-4o", 0, 10_000)) // $0.90
	b2, _ := NewBudget(Policy{Limits: Limits{Daily: 1}, WarnAt: 0.8}, l, BudgetOptions{Dir: dir, Notify: notify})
	b2.Observe(rec("a", OriginTurn, "openai/gpt-4o", 0, 0))
	want := "💸 Today's budget: $0.80 of $1 is spent (80%). At the limit new model calls stop until it resets at 00:00 UTC; /usage shows where it went, /budget lift lifts it for today."
	if len(got) != 1 || got[0] != want {
		t.Errorf("warnings = %q, want one: %q", got, want)
	}
}

// TestBudgetConcurrentChatsOvershootByTheTurnsInFlight: 50 chats start
// turns at once under a cap of 4 turns in flight; each turn is admitted,
// then its call is recorded. The spend passes the limit by less than the
// turns in flight at that moment.
func TestBudgetConcurrentChatsOvershootByTheTurnsInFlight(t *testing.T) {
	c := &setClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	l := openLedger(t, t.TempDir(), c, time.UTC)
	const limit, perTurn, inFlight = 1.0, 0.03, 4 // $0.03 a turn: gpt-4o, 3000 output tokens
	b, _ := NewBudget(Policy{Limits: Limits{Daily: limit}}, l, BudgetOptions{})
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stopped := 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chat := "telegram:" + string(rune('A'+i))
			for range 3 { // each chat sends three messages, one turn at a time
				slots <- struct{}{}
				ctx, d := b.Admit(WithCall(context.Background(), Call{Origin: OriginTurn, Chat: chat}))
				if d.Verdict == Stop {
					<-slots
					mu.Lock()
					stopped++
					mu.Unlock()
					continue
				}
				_ = l.Record(ctx, rec(chat, OriginTurn, "openai/gpt-4o", 0, 3000))
				<-slots
			}
		}()
	}
	wg.Wait()
	spent := l.Spent(Scope{}).Day.PricedUSD()
	if spent < limit || spent > limit+inFlight*perTurn+1e-9 {
		t.Errorf("spent $%.2f with a $%.2f limit; at most $%.2f over is allowed", spent, limit, inFlight*perTurn)
	}
	if stopped == 0 {
		t.Error("no turn was stopped")
	}
}
