package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler fetches pprof profiles from a gateway built with -tags
// nanobot_pprof while a load window runs.
type profiler struct {
	addr string // where the gateway serves /debug/pprof
	dir  string // where profiles are written
}

// traceSeconds is how much of the window the execution trace covers: enough
// for a few hundred turns, small enough for go tool trace to open quickly.
const traceSeconds = 2

// capture takes a CPU profile over the window starting at from, with an
// execution trace of the window's first seconds beside it, then the
// allocation, block and mutex profiles, writing name-cpu.pprof,
// name-trace.out and so on.
func (p profiler) capture(ctx context.Context, name string, from time.Time, window time.Duration) error {
	select {
	case <-time.After(time.Until(from)):
	case <-ctx.Done():
		return nil
	}
	secs := max(int(window.Seconds()), 1)
	// The trace runs beside the CPU profile, not after it: the load stops
	// when the window ends.
	traced := make(chan error, 1)
	go func() {
		traced <- p.fetch(ctx, fmt.Sprintf("trace?seconds=%d", min(traceSeconds, secs)), name+"-trace.out")
	}()
	err := p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", secs), name+"-cpu.pprof")
	if err := errors.Join(err, <-traced); err != nil {
		return err
	}
	for _, kind := range []string{"allocs", "block", "mutex", "heap"} {
		if err := p.fetch(ctx, kind, name+"-"+kind+".pprof"); err != nil {
			return err
		}
	}
	return nil
}

func (p profiler) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("pprof %s (is the binary built with -tags nanobot_pprof?): %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", path, resp.Status)
	}
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("pprof %s: %w", path, err)
	}
	return f.Close()
}
