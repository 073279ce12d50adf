package mcp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// Defaults for Options' zero values: internal bounds no config key carries
// (tools.mcp_servers.*.tool_timeout is config's, taken as given).
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultStopGrace      = 2 * time.Second
	// DefaultMaxMessageBytes is the SDK's bound on one message from a
	// stdio server: 16 MiB.
	DefaultMaxMessageBytes = sdk.DefaultMaxLineLength
)

// Registry is where server tools are offered to the model; the agent's
// *tools.Registry, whose Register and Unregister are safe while calls run.
type Registry interface {
	Register(t tools.Tool) error
	Unregister(name string)
}

// Options tune the manager; the zero value of each field means its default.
type Options struct {
	// Clock paces reconnection backoff and tool_timeout [the system clock].
	Clock clock.Clock
	// ConnectTimeout bounds connecting (for a stdio server: starting it and
	// the MCP handshake), listing tools and a health ping [30s].
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before reconnecting, which
	// doubles with each failure in a row [1s, 5m].
	MinBackoff, MaxBackoff time.Duration
	// StopGrace is how long a stdio server gets to exit after its stdin is
	// closed, and again after SIGTERM, before SIGKILL [2s].
	StopGrace time.Duration
	// MaxMessageBytes bounds one JSON-RPC message a stdio server sends; a
	// larger one breaks the connection, which is then remade
	// [DefaultMaxMessageBytes]. Tests lower it so that an oversized message
	// is cheap to send (17 MiB of JSON takes the race detector 20 s).
	MaxMessageBytes int
	// Workspace is where stdio servers run when their cwd is empty, and
	// what a relative cwd is relative to [the daemon's working directory].
	Workspace string
	// Secrets are removed from error text shown to the model and in /status.
	Secrets []string
	// Version is reported to servers as the client version.
	Version string
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	o.ConnectTimeout = cmp.Or(o.ConnectTimeout, DefaultConnectTimeout)
	o.MinBackoff = cmp.Or(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = max(cmp.Or(o.MaxBackoff, DefaultMaxBackoff), o.MinBackoff)
	o.StopGrace = cmp.Or(o.StopGrace, DefaultStopGrace)
	o.MaxMessageBytes = cmp.Or(o.MaxMessageBytes, DefaultMaxMessageBytes)
	o.Version = cmp.Or(o.Version, "dev")
	return o
}

// State is where a server's connection stands.
type State string

// The states of a server.
const (
	StateDisabled   State = "disabled"    // disabled: true; never connected
	StateIdle       State = "not started" // the manager is not running
	StateConnecting State = "connecting"
	StateConnected  State = "connected"
	StateRetrying   State = "retrying" // waiting out the backoff after a failure
	StateStopped    State = "stopped"  // the manager has shut down
)

// Status is a snapshot of one server.
type Status struct {
	Name      string
	Transport string // "stdio" or "http"
	State     State
	// Tools is how many of its tools are registered; Skipped how many could
	// not be (a schema or name the registry refused; see the log).
	Tools, Skipped int
	// LastError says why the last connection failed or ended.
	LastError string
	// RetryIn is the time left before the next attempt (StateRetrying).
	RetryIn time.Duration
	// PID is the stdio server's process id while it runs.
	PID int
}

// Manager owns the connections to the configured MCP servers.
type Manager struct {
	servers []*server // sorted by name
	log     *zap.Logger

	mu      sync.Mutex
	started bool
}

// NewManager prepares a manager for servers (tools.mcp_servers), whose tools
// it will register in reg. It does no I/O; Run connects.
func NewManager(servers map[string]config.MCPServerConfig, reg Registry, opts Options, log *zap.Logger) *Manager {
	opts = opts.withDefaults()
	m := &Manager{log: log}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		m.servers = append(m.servers, newServer(name, servers[name], reg, opts,
			log.With(zap.String("mcp_server", name))))
	}
	return m
}

// Run connects every enabled server in the background and keeps it
// connected until ctx ends; then it closes every connection, stops the
// stdio servers (and their process groups), unregisters their tools and
// returns nil. A server that fails never makes Run fail: it is retried, and
// its state shows in Status. Run may be called once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return fmt.Errorf("mcp: manager already ran")
	}
	m.started = true
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range m.servers {
		if s.cfg.Disabled {
			continue
		}
		wg.Go(func() { s.run(ctx) })
	}
	wg.Wait()
	return nil
}

// WaitStarted waits until every enabled server's first connection attempt
// has ended — connected with its tools registered, or failed (Run retries it
// in the background) — or until ctx ends, and returns the status of each
// enabled server not connected by then. A terminal session calls it after
// starting Run, under a deadline, so its first message finds the tools of
// the servers that start in time, and can tell the user which are missing.
func (m *Manager) WaitStarted(ctx context.Context) []Status {
	for _, s := range m.servers {
		if s.cfg.Disabled {
			continue
		}
		select {
		case <-s.tried:
		case <-ctx.Done():
		}
	}
	var missing []Status
	for _, st := range m.Status() {
		if st.State != StateDisabled && st.State != StateConnected {
			missing = append(missing, st)
		}
	}
	return missing
}

// Probe connects to one server as the gateway does (a stdio server is
// started), lists its tools, disconnects, and stops and reaps the process:
// nanobot doctor's check. It returns the names the tools would be
// registered under and how many were skipped (a schema nanobot cannot use,
// a clashing name); enabled_tools applies. opts.ConnectTimeout bounds it.
func Probe(ctx context.Context, name string, cfg config.MCPServerConfig, opts Options, log *zap.Logger) (tools []string, skipped int, err error) {
	reg := &toolList{}
	s := newServer(name, cfg, reg, opts.withDefaults(), log.With(zap.String("mcp_server", name)))
	_, err = s.connection(ctx, func(context.Context, *sdk.ClientSession, <-chan error, <-chan struct{}) error { return nil })
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return reg.names, s.skipped, nil
}

// toolList is a Registry that only notes names.
type toolList struct{ names []string }

func (l *toolList) Register(t tools.Tool) error {
	l.names = append(l.names, t.Spec().Name)
	return nil
}

func (l *toolList) Unregister(name string) {
	l.names = slices.DeleteFunc(l.names, func(n string) bool { return n == name })
}

// Status returns every configured server's state, sorted by name.
func (m *Manager) Status() []Status {
	out := make([]Status, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// maxErrorInStatus caps the error quoted in a status line.
const maxErrorInStatus = 160

// StatusLines describes each server in one line for the chat's /status:
// "MCP github (stdio): connected, 12 tools".
func (m *Manager) StatusLines() []string {
	lines := make([]string, 0, len(m.servers))
	for _, st := range m.Status() {
		var b strings.Builder
		fmt.Fprintf(&b, "MCP %s (%s): %s", st.Name, st.Transport, st.State)
		if st.State == StateRetrying {
			fmt.Fprintf(&b, " in %s", st.RetryIn.Round(time.Second))
		}
		if st.State != StateDisabled {
			fmt.Fprintf(&b, ", %s", plural(st.Tools, "tool"))
		}
		if st.Skipped > 0 {
			fmt.Fprintf(&b, " (%d skipped, see the log)", st.Skipped)
		}
		if st.LastError != "" && st.State != StateConnected {
			fmt.Fprintf(&b, "; last error: %s", clipText(st.LastError, maxErrorInStatus))
		}
		lines = append(lines, b.String())
	}
	return lines
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func clipText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
