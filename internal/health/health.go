// Package health answers the gateway's probes
// (docs/operations.md#the-http-listener). /healthz says the process is alive
// and serving HTTP. /readyz says it can do its job: every registered check
// passes (each enabled channel connected to its platform, the model provider
// not failing) and shutdown has not begun. Checks are cheap reads of state the
// components keep anyway; a probe never calls a platform or a provider.
package health

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
)

// Checker holds the readiness checks. It is safe for concurrent use.
type Checker struct {
	redact func(string) string

	mu       sync.RWMutex
	checks   []check
	draining atomic.Bool
}

type check struct {
	name string
	fn   func() error
}

// Result is one check's state in a Report.
type Result struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Report is the /readyz body.
type Report struct {
	Ready  bool     `json:"ready"`
	Checks []Result `json:"checks"`
}

// New returns a checker without checks (ready). redact cleans error text
// before it is served (probe answers may leave the machine); nil serves
// it as is.
func New(redact func(string) string) *Checker {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return &Checker{redact: redact}
}

// Add registers a check; fn returns nil while name is ready.
func (c *Checker) Add(name string, fn func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, check{name, fn})
}

// Drain marks the start of shutdown: from now on the daemon is not ready,
// so a load balancer or orchestrator stops sending it work.
func (c *Checker) Drain() { c.draining.Store(true) }

// Ready runs every check.
func (c *Checker) Ready() Report {
	c.mu.RLock()
	checks := append([]check(nil), c.checks...)
	c.mu.RUnlock()
	r := Report{Ready: true, Checks: make([]Result, 0, len(checks)+1)}
	if c.draining.Load() {
		r.Ready = false
		r.Checks = append(r.Checks, Result{Name: "shutdown", Error: "shutting down"})
	}
	for _, ch := range checks {
		res := Result{Name: ch.name, OK: true}
		if err := ch.fn(); err != nil {
			res.OK, res.Error = false, c.redact(err.Error())
			r.Ready = false
		}
		r.Checks = append(r.Checks, res)
	}
	return r
}

// Live serves /healthz: 200 "ok" while the process can answer at all.
func Live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// ServeHTTP serves /readyz: 200 when ready, 503 otherwise, with the Report
// as JSON so an operator sees which check fails.
func (c *Checker) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r := c.Ready()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !r.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(r)
}
