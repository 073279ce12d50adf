package daemon

import (
	"fmt"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// The usage ledger's report, for nanobot usage (cmd/nanobot may import only
// this package of the daemon's parts).
type (
	UsageReport = usage.Report
	UsageTotals = usage.Totals
	UsageGroup  = usage.Group
)

// UsageDimensions are what ReadUsage may group by.
var UsageDimensions = usage.Dimensions

// ReadUsage sums the usage ledger in usage.dir over the last days local
// days (budget.timezone's), grouped by by ("" for none; chat, model or
// origin). It opens the ledger read-only (usage.OpenReadOnly): it needs no
// model key, writes nothing, and may run while the gateway keeps the
// ledger.
func ReadUsage(cfg *config.Config, days int, by string) (UsageReport, error) {
	if days < 1 {
		return UsageReport{}, fmt.Errorf("usage: at least one day, got %d", days)
	}
	loc, err := usage.Zone(cfg.Budget.Timezone)
	if err != nil {
		return UsageReport{}, err
	}
	l, err := usage.OpenReadOnly(cfg.Usage.Dir, usage.Options{Location: loc})
	if err != nil {
		return UsageReport{}, err
	}
	return l.Query(usage.Query{Period: usage.LastDays(l.Now(), loc, days), By: usage.Dimension(by)})
}
