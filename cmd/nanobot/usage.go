package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newUsageCmd(g *globalFlags) *cobra.Command {
	var since, by string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the model calls, tokens and cost of the last days, from the usage ledger",
		Long: "Sums the usage ledger (usage.dir) over the last days, in budget.timezone's days: calls, tokens in\n" +
			"(and from the cache), out, and the cost at the configured prices, or \"unpriced\" (JSON: null) when a model\n" +
			"in the period has no price. It reads the ledger without writing, so it runs beside the gateway and needs\n" +
			"no model key.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			days, err := parseSince(since)
			if err != nil {
				return err
			}
			// Load decodes strictly (a typo fails), but Validate is not asked:
			// its refusals (a missing model key, a channel without a token)
			// are about running the model, which this command never does;
			// what it reads, usage.dir and budget.timezone, ReadUsage checks.
			cfg, err := daemon.LoadConfig(g.configFile())
			if err != nil {
				return err
			}
			rep, err := daemon.ReadUsage(cfg, days, by)
			if err != nil {
				return err
			}
			if asJSON {
				return printUsageJSON(cmd.OutOrStdout(), rep, by)
			}
			return printUsage(cmd.OutOrStdout(), rep, by)
		},
	}
	dims := make([]string, 0, len(daemon.UsageDimensions))
	for _, d := range daemon.UsageDimensions {
		dims = append(dims, string(d))
	}
	cmd.Flags().StringVar(&since, "since", "30d", "how far back: a number of days (30d) or weeks (4w), today included")
	cmd.Flags().StringVar(&by, "by", "", "group by "+strings.Join(dims, ", ")+" (default: none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// parseSince reads --since: "30d" or "4w", counted in local days with
// today included.
func parseSince(s string) (int, error) {
	s = strings.TrimSpace(s)
	unit := 1
	switch {
	case strings.HasSuffix(s, "d"):
		s = strings.TrimSuffix(s, "d")
	case strings.HasSuffix(s, "w"):
		s, unit = strings.TrimSuffix(s, "w"), 7
	default:
		return 0, fmt.Errorf("--since %q: a number of days or weeks, such as 30d or 4w", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100*366 {
		return 0, fmt.Errorf("--since: a number of days or weeks, such as 30d or 4w")
	}
	return n * unit, nil
}

// usageTotals is one line of the JSON: cost is dollars, or null when a
// model in it has no price (the contract of nanobot usage --json).
type usageTotals struct {
	Calls         int64    `json:"calls"`
	Failed        int64    `json:"failed"`
	Estimated     int64    `json:"estimated"`
	InputTokens   int64    `json:"input_tokens"`
	OutputTokens  int64    `json:"output_tokens"`
	CacheRead     int64    `json:"cache_read_tokens"`
	CacheWrite    int64    `json:"cache_write_tokens"`
	Reasoning     int64    `json:"reasoning_tokens"`
	Cost          *float64 `json:"cost"`
	UnpricedCalls int64    `json:"unpriced_calls"`
}

func jsonTotals(t daemon.UsageTotals) usageTotals {
	return usageTotals{Calls: t.Calls, Failed: t.Failed, Estimated: t.Estimated, InputTokens: t.Input, OutputTokens: t.Output,
		CacheRead: t.CacheRead, CacheWrite: t.CacheWrite, Reasoning: t.Reasoning, Cost: t.Cost.JSONUSD(), UnpricedCalls: t.Cost.UnpricedCalls()}
}

func printUsageJSON(out io.Writer, rep daemon.UsageReport, by string) error {
	type group struct {
		Key string `json:"key"`
		usageTotals
	}
	v := struct {
		From     string      `json:"from"`
		To       string      `json:"to"`
		Timezone string      `json:"timezone"`
		By       string      `json:"by,omitempty"`
		Total    usageTotals `json:"total"`
		Groups   []group     `json:"groups,omitempty"`
	}{From: rep.Period.From, To: rep.Period.To, Timezone: rep.Location, By: by, Total: jsonTotals(rep.Total)}
	for _, g := range rep.Groups {
		v.Groups = append(v.Groups, group{Key: g.Key, usageTotals: jsonTotals(g.Totals)})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printUsage(out io.Writer, rep daemon.UsageReport, by string) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "Usage from %s to %s (%s days)\n\n", rep.Period.From, rep.Period.To, rep.Location)
	head := "total"
	if by != "" {
		head = by
	}
	fmt.Fprintf(w, "%s\tcalls\tinput\tcache read\tcache write\toutput\tcost\t\n", head)
	row := func(key string, t daemon.UsageTotals) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", key, t.Calls, t.Input, t.CacheRead, t.CacheWrite, t.Output, t.Cost)
	}
	for _, g := range rep.Groups {
		key := g.Key
		if key == "" {
			key = "(none)"
		}
		row(key, g.Totals)
	}
	if by != "" {
		row("total", rep.Total)
	} else {
		row("", rep.Total)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !rep.Total.Cost.Known() {
		fmt.Fprintf(out, "\n%d calls used a model without a price (docs/usage.md#prices); the rest cost $%.4f.\n",
			rep.Total.Cost.UnpricedCalls(), rep.Total.Cost.PricedUSD())
	}
	return nil
}
