package usage

import (
	"fmt"
	"time"
	// The zone database is linked in: the static binary runs in images
	// without /usr/share/zoneinfo (the Dockerfile's), and budget.timezone
	// must mean the same there.
	_ "time/tzdata"
)

// Zone is the location of budget.timezone: "" is the machine's local zone.
func Zone(name string) (*time.Location, error) {
	if name == "" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("budget.timezone: %w", err)
	}
	return loc, nil
}
