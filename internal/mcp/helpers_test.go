package mcp

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// stdioServer configures the test binary as a stdio server in mode.
func stdioServer(mode string) config.MCPServerConfig {
	return config.MCPServerConfig{Command: os.Args[0], ToolTimeout: 10 * time.Second, Env: map[string]string{
		serverModeEnv: mode,
		// A race-enabled binary otherwise sleeps a second before exiting.
		"GORACE": "atexit_sleep_ms=0",
	}}
}

// testRig runs a manager over a real tool registry.
type testRig struct {
	t     *testing.T
	reg   *tools.Registry
	mgr   *Manager
	clock *clock.Fake
	stop  func() // cancels Run and waits for it
}

// startManager runs a manager for servers until the test ends (or stop).
func startManager(t *testing.T, servers map[string]config.MCPServerConfig, tweak ...func(*Options)) *testRig {
	t.Helper()
	log := zaptest.NewLogger(t)
	r := &testRig{t: t, clock: clock.NewFake()}
	r.reg = tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), log) // the 2m default: each server has its tool_timeout
	opts := Options{Clock: r.clock, ConnectTimeout: 10 * time.Second, StopGrace: 500 * time.Millisecond, Version: "test"}
	for _, f := range tweak {
		f(&opts)
	}
	r.mgr = NewManager(servers, r.reg, opts, log.Named("mcp"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.mgr.Run(ctx) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of cancellation")
		}
	}
	t.Cleanup(r.stop)
	return r
}

// status returns the named server's status.
func (r *testRig) status(name string) Status {
	for _, st := range r.mgr.Status() {
		if st.Name == name {
			return st
		}
	}
	r.t.Fatalf("no server %q", name)
	return Status{}
}

// waitState waits until the named server reaches state.
func (r *testRig) waitState(name string, state State) Status {
	r.t.Helper()
	var st Status
	waitFor(r.t, "server "+name+" "+string(state), func() bool {
		st = r.status(name)
		return st.State == state
	})
	return st
}

// call runs one tool call through the registry, as the agent does.
func (r *testRig) call(name string, args any) llm.ToolResult {
	r.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.reg.Execute(context.Background(), llm.ToolCall{ID: "c1", Name: name, Arguments: raw}, tools.Origin{})
}

// waitFor polls cond until it holds, failing the test after 15 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
