package usage

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestAppendRecordIsMarshal: the ledger's own encoder writes what
// json.Marshal writes, for every field set or not, strings that need
// escaping (HTML, control characters, invalid UTF-8, U+2028) and floats
// in either notation, so the detail files read as they always did.
func TestAppendRecordIsMarshal(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	full := Record{Time: time.Date(2026, 12, 1, 23, 59, 59, 123456789, berlin), Session: "telegram:42:topic:7", Chat: "telegram:42",
		Origin: OriginTurn, Route: "careful", Provider: "openai", Model: "gpt-4o-mini",
		Tokens:    llm.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 4000, CacheWriteTokens: 7, ReasoningTokens: 9},
		Estimated: true, AudioSeconds: 61.5, Outcome: OutcomeRetried, Cost: Nanos(123456), Worker: "w-1", Seq: 1 << 40}
	tests := []struct {
		name string
		r    Record
	}{
		{"every field", full},
		{"the least", Record{Time: time.Unix(0, 0).UTC(), Origin: OriginUnknown, Outcome: OutcomeOK}},
		{"unpriced", Record{Time: time.Unix(1_800_000_000, 5).UTC(), Origin: OriginCron, Provider: "x", Model: "y", Outcome: OutcomeFailed, Cost: Unpriced}},
		{"some tokens", Record{Time: time.Unix(1_800_000_000, 0), Tokens: llm.Usage{OutputTokens: 3, ReasoningTokens: 1}}},
		{"escaping", Record{Session: "a<b>&\"c\\\n\t\x01\u2028\u2029é😀", Chat: "\xff\xfe bad", Model: "m\x7f</script>"}},
		{"tiny seconds", Record{AudioSeconds: 1e-7}},
		{"huge seconds", Record{AudioSeconds: 1e22}},
		{"negative cost", Record{Cost: Nanos(-5)}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "telegram:1", "api:webui:abc", "<&>", "ünïcödé", "\x00\x1f", "gpt-4.1"}
	for i := range 200 {
		pick := func() string { return words[rng.IntN(len(words))] }
		tests = append(tests, struct {
			name string
			r    Record
		}{"random", Record{Time: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)), Session: pick(), Chat: pick(), Origin: Origin(pick()),
			Route: pick(), Provider: pick(), Model: pick(), Tokens: llm.Usage{InputTokens: rng.IntN(3) * rng.IntN(1e6), OutputTokens: rng.IntN(2) * 17},
			Estimated: i%3 == 0, AudioSeconds: float64(rng.IntN(2)) * rng.Float64() * math.Pow(10, float64(rng.IntN(40)-20)),
			Outcome: Outcome(pick()), Cost: Cost{nanos: rng.Int64N(1e12) - 5e11, unpriced: rng.Int64N(2)}, Worker: pick(), Seq: uint64(rng.IntN(2)) * rng.Uint64()}})
	}
	for _, tt := range tests {
		want, err := json.Marshal(tt.r)
		if err != nil {
			t.Fatalf("%s: json.Marshal: %v", tt.name, err)
		}
		got, err := appendRecord([]byte("prefix"), tt.r)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s (%v)\nwant prefix%s", tt.name, got, err, want)
		}
	}
	for _, bad := range []Record{{AudioSeconds: math.NaN()}, {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if _, err := appendRecord(nil, bad); err == nil {
			t.Errorf("%+v encoded; json.Marshal refuses it", bad)
		}
	}
}
