package usage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// setClock is a settable time source for the ledger and budget.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *setClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("no time zone data (the binary embeds none; install it: apt-get install tzdata): %v", err)
	}
	return loc
}

func openLedger(t *testing.T, dir string, c *setClock, loc *time.Location) *Ledger {
	t.Helper()
	l, err := Open(dir, Options{Location: loc, Clock: clock.Func(c.Now), Prices: NewPriceTable(nil), SyncEvery: time.Hour, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func rec(chat string, origin Origin, model string, in, out int) Record {
	prov, id, _ := strings.Cut(model, "/")
	return Record{Chat: chat, Session: chat, Origin: origin, Provider: prov, Model: id, Route: model,
		Tokens: llm.Usage{InputTokens: in, OutputTokens: out}, Outcome: OutcomeOK}
}

func TestLedgerRecordsAndQueries(t *testing.T) {
	c := &setClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	l := openLedger(t, t.TempDir(), c, time.UTC)
	ctx := context.Background()
	for _, r := range []Record{
		rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 1_000_000, 0),                     // $0.15
		rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 0, 1_000_000),                     // $0.60
		rec("discord:2", OriginHeartbeat, "anthropic/claude-haiku-4-5", 1_000_000, 1_000_000), // $6
		rec("discord:2", OriginCron, "ollama/llama3", 10, 10),                                 // unpriced
	} {
		if err := l.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := l.Query(Query{Period: Today(c.Now(), time.UTC), By: ByModel})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Calls != 4 || rep.Total.Input != 2_000_010 || rep.Total.Output != 2_000_010 {
		t.Errorf("total = %+v", rep.Total)
	}
	if rep.Total.Cost.Known() || rep.Total.Cost.String() != "unpriced" {
		t.Errorf("total cost = %s, want unpriced (a model has no price)", rep.Total.Cost)
	}
	if got := rep.Total.Cost.PricedNanos(); got != USD(6.75).PricedNanos() {
		t.Errorf("priced part = %d nanos, want $6.75", got)
	}
	want := []string{"anthropic/claude-haiku-4-5", "openai/gpt-4o-mini", "ollama/llama3"}
	for i, g := range rep.Groups {
		if i >= len(want) || g.Key != want[i] {
			t.Fatalf("groups = %+v, want keys %v (by cost, unpriced last)", rep.Groups, want)
		}
	}
	if rep.Groups[1].Cost.String() != "$0.75" {
		t.Errorf("gpt-4o-mini cost = %s, want $0.75", rep.Groups[1].Cost)
	}
	byChat, _ := l.Query(Query{Period: Today(c.Now(), time.UTC), Chat: "telegram:1"})
	if byChat.Total.Calls != 2 || byChat.Total.Cost.String() != "$0.75" {
		t.Errorf("telegram:1 = %+v", byChat.Total)
	}
	if sp := l.Spent(Scope{Origin: OriginHeartbeat}); sp.Day.String() != "$6" || sp.Month.String() != "$6" {
		t.Errorf("heartbeat spent = %+v", sp)
	}
}

func TestLedgerRestartMidDayKeepsTheDay(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)}
	l := openLedger(t, dir, c, time.UTC)
	for range 3 {
		if err := l.Record(context.Background(), rec("telegram:1", OriginTurn, "openai/gpt-4o", 1000, 100)); err != nil {
			t.Fatal(err)
		}
	}
	before := l.Spent(Scope{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c.Set(c.Now().Add(3 * time.Hour))
	l2 := openLedger(t, dir, c, time.UTC)
	if after := l2.Spent(Scope{}); after != before || after.Day.PricedNanos() == 0 {
		t.Errorf("after restart spent = %+v, want %+v", after, before)
	}
	if err := l2.Record(context.Background(), rec("telegram:1", OriginTurn, "openai/gpt-4o", 1000, 100)); err != nil {
		t.Fatal(err)
	}
	rep, _ := l2.Query(Query{Period: Today(c.Now(), time.UTC)})
	if rep.Total.Calls != 4 {
		t.Errorf("calls = %d, want 4", rep.Total.Calls)
	}
}

func TestLedgerToleratesATornLastLine(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)}
	l := openLedger(t, dir, c, time.UTC)
	if err := l.Record(context.Background(), rec("telegram:1", OriginTurn, "openai/gpt-4o", 1000, 100)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	path := filepath.Join(dir, "detail-2026-03-10.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2026-03-10T09:00:01Z","origin":"turn","provi`) // a crash mid-write
	_ = f.Close()

	l2 := openLedger(t, dir, c, time.UTC)
	if err := l2.Record(context.Background(), rec("telegram:1", OriginTurn, "openai/gpt-4o", 1000, 100)); err != nil {
		t.Fatal(err)
	}
	_ = l2.Close()
	l3 := openLedger(t, dir, c, time.UTC)
	rep, _ := l3.Query(Query{Period: Today(c.Now(), time.UTC)})
	if rep.Total.Calls != 2 {
		t.Errorf("calls = %d, want 2 (the torn line dropped, the next record whole)", rep.Total.Calls)
	}
}

// TestLedgerDayBoundaryInTimezone: days are local days of the configured
// zone; the day's sums are sealed at the boundary and a start reads them
// back; detail past the retention is deleted and its day still counts.
func TestLedgerDayBoundaryInTimezone(t *testing.T) {
	loc := berlin(t)
	dir := t.TempDir()
	// 22:59 UTC on 31 March is 00:59 on 1 April in Berlin (summer time).
	c := &setClock{t: time.Date(2026, 3, 31, 21, 30, 0, 0, time.UTC)} // 23:30 Berlin, 31 March
	l, err := Open(dir, Options{Location: loc, Clock: clock.Func(c.Now), Prices: NewPriceTable(nil), SyncEvery: time.Hour, Retention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = l.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 1_000_000, 0)) // $0.15 on 31 March
	c.Set(time.Date(2026, 3, 31, 22, 30, 0, 0, time.UTC))                                // 00:30 Berlin, 1 April
	if sp := l.Spent(Scope{}); sp.Date != "2026-04-01" || sp.Day.PricedNanos() != 0 || sp.Month.PricedNanos() != 0 {
		t.Errorf("after midnight Berlin: %+v, want a new day and a new month at $0", sp)
	}
	_ = l.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 2_000_000, 0)) // $0.30 on 1 April
	if sp := l.Spent(Scope{}); sp.Day.String() != "$0.30" || sp.Month.String() != "$0.30" {
		t.Errorf("1 April spent = %+v", sp)
	}
	march, _ := l.Query(Query{Period: Period{From: "2026-03-01", To: "2026-03-31"}, Daily: true})
	if march.Total.Cost.String() != "$0.15" || len(march.Days) != 31 || march.Days[30].Calls != 1 {
		t.Errorf("March = %s, %d days", march.Total.Cost, len(march.Days))
	}
	_ = l.Close()

	// Days later: March's detail is past the retention and deleted; its
	// sums stay.
	c.Set(time.Date(2026, 4, 5, 10, 0, 0, 0, time.UTC))
	l2, err := Open(dir, Options{Location: loc, Clock: clock.Func(c.Now), Prices: NewPriceTable(nil), Retention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l2.Close() }()
	if _, err := os.Stat(filepath.Join(dir, "detail-2026-03-31.jsonl")); !os.IsNotExist(err) {
		t.Errorf("old detail still there: %v", err)
	}
	all, _ := l2.Query(Query{Period: Period{From: "2026-03-01", To: "2026-04-05"}, By: ByOrigin})
	if all.Total.Calls != 2 || all.Total.Cost.String() != "$0.45" || len(all.Groups) != 1 || all.Groups[0].Key != "turn" {
		t.Errorf("after roll-up: %+v", all)
	}
}

func TestLedgerLateRecordCountsOnItsDay(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 11, 0, 5, 0, 0, time.UTC)}
	l := openLedger(t, dir, c, time.UTC)
	ctx := context.Background()
	_ = l.Record(ctx, rec("a", OriginTurn, "openai/gpt-4o", 10, 10))
	late := rec("a", OriginTurn, "openai/gpt-4o", 10, 10)
	late.Time = time.Date(2026, 3, 10, 23, 59, 0, 0, time.UTC)
	_ = l.Record(ctx, late)
	_ = l.Close()
	l2 := openLedger(t, dir, c, time.UTC)
	for date, want := range map[string]int64{"2026-03-10": 1, "2026-03-11": 1} {
		rep, _ := l2.Query(Query{Period: Period{From: date, To: date}})
		if rep.Total.Calls != want {
			t.Errorf("%s: %d calls, want %d", date, rep.Total.Calls, want)
		}
	}
}

func TestQueryRefusesBadInput(t *testing.T) {
	l := openLedger(t, t.TempDir(), &setClock{t: time.Now()}, time.UTC)
	for _, q := range []Query{{Period: Period{From: "x", To: "y"}}, {Period: Period{From: "2026-01-02", To: "2026-01-01"}},
		{Period: Period{From: "2026-01-01", To: "2026-01-01"}, By: "colour"}} {
		if _, err := l.Query(q); err == nil {
			t.Errorf("Query(%+v) succeeded", q)
		}
	}
}

func TestPeriods(t *testing.T) {
	loc := berlin(t)
	now := time.Date(2026, 3, 4, 23, 30, 0, 0, time.UTC) // Thursday 5 March, 00:30 in Berlin
	tests := []struct {
		name string
		got  Period
		want Period
	}{
		{"today", Today(now, loc), Period{"2026-03-05", "2026-03-05"}},
		{"week", Week(now, loc), Period{"2026-03-02", "2026-03-05"}},
		{"month", Month(now, loc), Period{"2026-03-01", "2026-03-05"}},
		{"30 days", LastDays(now, loc, 30), Period{"2026-02-04", "2026-03-05"}},
		{"today in UTC", Today(now, time.UTC), Period{"2026-03-04", "2026-03-04"}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestLedgerTwoWritersSealADayOnce: two processes writing one ledger dir
// (nanobot agent beside the gateway) both seal a finished day; the day
// counts both processes' records, once.
func TestLedgerTwoWritersSealADayOnce(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 22, 0, 0, 0, time.UTC)}
	a, b := openLedger(t, dir, c, time.UTC), openLedger(t, dir, c, time.UTC)
	ctx := context.Background()
	_ = a.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o", 10, 10))
	_ = b.Record(ctx, rec("cli:direct", OriginTurn, "openai/gpt-4o", 10, 10))
	_ = b.Record(ctx, rec("cli:direct", OriginTurn, "openai/gpt-4o", 10, 10))
	c.Set(time.Date(2026, 3, 11, 8, 0, 0, 0, time.UTC))
	_ = a.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o", 10, 10)) // seals the 10th
	_ = b.Record(ctx, rec("cli:direct", OriginTurn, "openai/gpt-4o", 10, 10)) // seals it again
	_ = a.Close()
	_ = b.Close()
	l := openLedger(t, dir, c, time.UTC)
	rep, _ := l.Query(Query{Period: Period{From: "2026-03-10", To: "2026-03-10"}})
	if rep.Total.Calls != 3 {
		t.Errorf("10 March: %d calls, want 3", rep.Total.Calls)
	}
}
