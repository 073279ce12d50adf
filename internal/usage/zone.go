package usage

import (
	"fmt"
	"time"
)

// Zone is the location of budget.timezone: "" is the machine's local zone.
// The zone database is the system's (/usr/share/zoneinfo; the Docker image
// installs Alpine's tzdata): the binary does not embed one, which would add
// 450 KB to it (docs/BENCHMARKS.md, binary size). Without it, a named zone
// fails here with the package to install, as the schedule's zones do.
func Zone(name string) (*time.Location, error) {
	if name == "" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		if _, probe := time.LoadLocation("America/New_York"); probe != nil {
			return nil, fmt.Errorf("budget.timezone %q: this machine has no time zone data (install the tzdata package); use \"UTC\" meanwhile: %w", name, err)
		}
		return nil, fmt.Errorf("budget.timezone: %w", err)
	}
	return loc, nil
}
