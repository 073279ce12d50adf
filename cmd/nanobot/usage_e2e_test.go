package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// usageJSON is the contract of nanobot usage --json.
type usageJSON struct {
	From, To, Timezone string
	Total              struct {
		Calls        int64    `json:"calls"`
		InputTokens  int64    `json:"input_tokens"`
		OutputTokens int64    `json:"output_tokens"`
		Cost         *float64 `json:"cost"`
	} `json:"total"`
	Groups []struct {
		Key  string   `json:"key"`
		Cost *float64 `json:"cost"`
	} `json:"groups"`
}

// nanobot usage reads the ledger while its keeper has it open (here this
// test, as the gateway would), with no model key in the environment:
// --since 1d --json prints one object whose total holds calls, tokens and
// the cost, a number while every model is priced and null once one is not;
// --by groups; the plain table says "unpriced".
func TestUsageCommandReadsTheLedgerBesideItsKeeper(t *testing.T) {
	e := newEnv(t)
	keeper, err := usage.Open(filepath.Join(e.home, ".nanobot", "usage"), usage.Options{Location: time.Local, Prices: usage.NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keeper.Close() })
	record := func(at time.Time, provider, model string, in, out int) {
		t.Helper()
		if err := keeper.Record(context.Background(), usage.Record{Time: at, Chat: "telegram:1", Session: "telegram:1", Origin: usage.OriginTurn,
			Provider: provider, Model: model, Tokens: llm.Usage{InputTokens: in, OutputTokens: out}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	record(now, "openai", "gpt-4o-mini", 1_000_000, 0)                // $0.15
	record(now, "openai", "gpt-4o-mini", 0, 1_000_000)                // $0.60
	record(now.AddDate(0, 0, -3), "openai", "gpt-4o-mini", 1_000, 10) // outside --since 1d

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin", "OPENAI_API_KEY="} // no model key
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("nanobot %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	var got usageJSON
	if err := json.Unmarshal([]byte(run("usage", "--since", "1d", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Total.Calls != 2 || got.Total.InputTokens != 1_000_000 || got.Total.OutputTokens != 1_000_000 ||
		got.Total.Cost == nil || *got.Total.Cost != 0.75 || got.From != now.Format(time.DateOnly) {
		t.Errorf("usage --since 1d --json = %+v (cost %v), want 2 calls, 1M in, 1M out, $0.75 today", got, got.Total.Cost)
	}

	record(now, "ollama", "llama3", 50, 5)
	got = usageJSON{}
	if err := json.Unmarshal([]byte(run("usage", "--since", "7d", "--by", "model", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Total.Calls != 4 || got.Total.Cost != nil || len(got.Groups) != 2 || got.Groups[1].Key != "ollama/llama3" || got.Groups[1].Cost != nil ||
		got.Groups[0].Cost == nil {
		t.Errorf("usage --since 7d --by model --json = %+v: want 4 calls, cost null (a model without a price), the priced model first", got)
	}
	if out := run("usage", "--since", "1d"); !strings.Contains(out, "unpriced") || !strings.Contains(out, "1 calls used a model without a price") {
		t.Errorf("usage table:\n%s", out)
	}
}
