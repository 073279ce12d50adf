package usage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// BenchmarkRecord is the cost of recording one model call: price it, one
// write(2) to today's file, count it in memory (SyncEvery 1s, the default:
// no fsync per record).
func BenchmarkRecord(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Prices: NewPriceTable(nil), SyncEvery: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	r := Record{Session: "telegram:42", Chat: "telegram:42", Origin: OriginTurn, Route: "openai/gpt-4o-mini", Provider: "openai",
		Model: "gpt-4o-mini", Tokens: llm.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 4000}, Outcome: OutcomeOK}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Record(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// busyYear writes a year of a busy daemon's days.jsonl: 365 sealed days of
// 40 chats × 4 origins × 3 models (480 groups a day, ~50,000 calls a
// day), the way the ledger seals them.
func busyYear(b *testing.B, dir string, end time.Time) {
	b.Helper()
	l, err := Open(dir, Options{Prices: NewPriceTable(nil), Clock: clock.Func(func() time.Time { return end })})
	if err != nil {
		b.Fatal(err)
	}
	models := []string{"openai/gpt-4o-mini", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash"}
	origins := []Origin{OriginTurn, OriginHeartbeat, OriginCron, OriginConsolidation}
	for d := 365; d >= 1; d-- {
		date := end.AddDate(0, 0, -d).Format(time.DateOnly)
		agg := dayAgg{}
		for c := range 40 {
			for _, o := range origins {
				for _, m := range models {
					agg[groupKey{Chat: fmt.Sprintf("telegram:%d", c), Origin: o, Model: m}] = &Totals{Calls: 100, Input: 120_000, Output: 30_000, Cost: Nanos(50_000_000)}
				}
			}
		}
		l.days[date] = agg
		if err := l.sealLocked(date); err != nil {
			b.Fatal(err)
		}
	}
	_ = l.Close()
}

// BenchmarkOpenYear is a start over a busy year: reading 365 days' sums.
func BenchmarkOpenYear(b *testing.B) {
	dir := b.TempDir()
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	busyYear(b, dir, end)
	for b.Loop() {
		l, err := Open(dir, Options{Clock: clock.Func(func() time.Time { return end })})
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Close()
	}
}

// BenchmarkQueryYear is a query over a busy year: the whole year grouped
// by chat, and the 30-day chart by origin; and the budget's check.
func BenchmarkQueryYear(b *testing.B) {
	dir := b.TempDir()
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	busyYear(b, dir, end)
	l, err := Open(dir, Options{Clock: clock.Func(func() time.Time { return end })})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	b.Run("year-by-chat", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Query(Query{Period: LastDays(end, time.UTC, 365), By: ByChat}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("30-days-daily-by-origin", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Query(Query{Period: LastDays(end, time.UTC, 30), By: ByOrigin, Daily: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	bud, _ := NewBudget(Policy{Limits: Limits{Daily: 100, Monthly: 1000}, PerChat: Limits{Daily: 5}}, l, BudgetOptions{})
	b.Run("budget-check", func(b *testing.B) {
		for b.Loop() {
			bud.Check(Call{Origin: OriginTurn, Chat: "telegram:3"})
		}
	})
}
