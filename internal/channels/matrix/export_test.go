package matrix

// SetTimelineLimit lowers the events per room one sync returns, so a test
// makes a gap (a limited timeline) with a few messages. Call before Run.
func SetTimelineLimit(c *Channel, n int) { c.timelineLimit = n }
