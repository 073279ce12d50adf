package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/health"
)

// Probe GETs path (/healthz, /readyz) on the gateway listening on addr; a
// wildcard host is reached on loopback. Any status but 200 is an error
// carrying the body. `nanobot healthcheck`, status and doctor ask the
// running gateway through it.
func Probe(ctx context.Context, addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("gateway.listen %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// Readiness asks the gateway on addr for its /readyz report, whatever its
// status (503 carries the reasons). ok is false when no gateway answers.
func Readiness(ctx context.Context, addr string) (r health.Report, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return r, false
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return r, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r); err != nil {
		return r, false
	}
	return r, true
}

// PartState is one provider's or channel's state for `nanobot status`:
// Up, or why not. Known is false when nothing can be said (no gateway runs
// and the config shows nothing wrong).
type PartState struct {
	Up     bool
	Known  bool
	Reason string
}

// PartStates says how each provider in use ("provider <name>") and each
// enabled channel (by its name, from the channel table) is doing: as the running
// gateway's /readyz reports it, else what the config alone shows (a
// missing key or token).
func PartStates(ctx context.Context, cfg *config.Config) map[string]PartState {
	out := map[string]PartState{}
	if r, ok := Readiness(ctx, cfg.Gateway.Listen); ok {
		for _, c := range r.Checks {
			out[c.Name] = PartState{Up: c.OK, Known: true, Reason: c.Error}
		}
		return out
	}
	for _, name := range cfg.UsedProviders() {
		if p := cfg.ProviderProblem(name); p != "" {
			out["provider "+name] = PartState{Known: true, Reason: p}
		}
	}
	for _, name := range ChannelNames() {
		if p := cfg.ChannelProblem(name); p != "" {
			out[name] = PartState{Known: true, Reason: p}
		}
	}
	return out
}
