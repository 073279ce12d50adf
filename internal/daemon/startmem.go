package daemon

import (
	"context"
	"runtime/debug"
	"time"
)

// startRelease hands the start's garbage back to the operating system once
// the gateway is ready. Starting allocates about twice what stays live
// (package inits compiling patterns, the config, the workspace, a Discord
// READY), and the runtime keeps freed pages up to its 4 MB minimum heap goal:
// without this an idle gateway holds anonymous memory it will not use. One
// forced GC at start is cheap beside that (the figures:
// docs/BENCHMARKS.md#figures-behind-code-choices).
type startRelease struct {
	ready   func() bool   // every readiness check passes
	release func()        // debug.FreeOSMemory outside tests
	poll    time.Duration // how often ready is asked
	limit   time.Duration // a channel that never gets ready does not keep the garbage
}

func newStartRelease(ready func() bool) startRelease {
	return startRelease{ready: ready, release: debug.FreeOSMemory, poll: 50 * time.Millisecond, limit: 30 * time.Second}
}

// run waits for readiness (or the limit) and releases once; it returns early,
// releasing nothing, when ctx ends.
func (s startRelease) run(ctx context.Context) {
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	limit := time.NewTimer(s.limit)
	defer limit.Stop()
	for !s.ready() {
		select {
		case <-ctx.Done():
			return
		case <-limit.C:
			s.release()
			return
		case <-tick.C:
		}
	}
	s.release()
}
