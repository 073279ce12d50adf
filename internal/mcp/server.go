package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
)

// stableAfter is how long a connection must have lasted for its end to
// count as a new problem rather than one more failure in a row: the backoff
// starts over.
const stableAfter = time.Minute

var errExited = errors.New("the server process exited")

// server is one configured MCP server: its connection loop, its session and
// the tools it has registered.
type server struct {
	name    string
	cfg     config.MCPServerConfig
	kind    string // "stdio" or "http"
	timeout time.Duration
	reg     Registry
	opts    Options
	log     *zap.Logger

	// refresh and check are coalescing signals to the connection loop: the
	// server said its tool list changed; a call failed in transport.
	refresh chan struct{}
	check   chan struct{}
	// tried is closed once the first connection attempt has ended: the
	// server is connected with its tools registered, or it failed (and is
	// retried), or the manager stopped.
	tried     chan struct{}
	triedOnce sync.Once

	mu        sync.Mutex
	sess      *sdk.ClientSession
	pid       int
	state     State
	lastErr   string
	nextRetry time.Time
	tools     map[string]*tool // by registered name
	skipped   int
}

func newServer(name string, cfg config.MCPServerConfig, reg Registry, opts Options, log *zap.Logger) *server {
	kind := "stdio"
	if cfg.URL != "" {
		kind = "http"
	}
	timeout := cfg.ToolTimeout // config's default (60s) and Validate own it
	state := StateIdle
	if cfg.Disabled {
		state = StateDisabled
	}
	return &server{
		name: name, cfg: cfg, kind: kind, timeout: timeout, reg: reg, opts: opts, log: log,
		refresh: make(chan struct{}, 1), check: make(chan struct{}, 1), tried: make(chan struct{}),
		state: state, tools: map[string]*tool{},
	}
}

// run connects, serves and reconnects with exponential backoff until ctx
// ends; then it closes the connection (stopping a stdio server's process
// group) and removes the server's tools.
func (s *server) run(ctx context.Context) {
	defer s.unregisterAll()
	defer s.attempted()
	failures := 0
	for {
		s.setState(StateConnecting, "")
		up, err := s.connection(ctx, s.serve)
		if ctx.Err() != nil {
			s.setState(StateStopped, "")
			return
		}
		if up >= stableAfter {
			failures = 0
		}
		failures++
		delay := backoff(failures, s.opts.MinBackoff, s.opts.MaxBackoff)
		s.mu.Lock()
		s.state, s.lastErr, s.nextRetry = StateRetrying, s.redact(err.Error()), s.opts.Clock.Now().Add(delay)
		s.mu.Unlock()
		s.attempted()
		s.log.Warn("mcp server unavailable; retrying", zap.Error(err), zap.Int("failures", failures), zap.Duration("retry_in", delay))
		if clock.Sleep(ctx, s.opts.Clock, delay) != nil {
			s.setState(StateStopped, "")
			return
		}
	}
}

// backoff is the wait after the n-th failure in a row: lo doubled n-1
// times, at most hi.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// connection makes one connection, lists the server's tools and serves it
// with serve until it breaks or ctx ends. It reports how long the
// connection was up and why it ended.
func (s *server) connection(ctx context.Context, serve func(context.Context, *sdk.ClientSession, <-chan error, <-chan struct{}) error) (up time.Duration, err error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "nanobot", Version: s.opts.Version}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: nanobot only calls tools.
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { signal1(s.refresh) },
	})
	tr, onConnect, release := s.transport()
	// Runs last, after the session is closed: a stdio server is gone and
	// reaped before the next attempt starts another.
	defer func() { err = release(ctx, err) }()

	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	sess, err := client.Connect(cctx, tr, nil)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	ended := make(chan error, 1)
	var waiter sync.WaitGroup
	waiter.Go(func() { ended <- sess.Wait() })
	defer func() {
		s.setSession(nil) // new calls see "not connected", not a closing session
		_ = sess.Close()
		waiter.Wait()
	}()

	exited := onConnect()
	drain(s.refresh) // signals meant for the previous session; the list is fetched now
	drain(s.check)
	if err := s.listTools(ctx, sess); err != nil {
		return 0, err
	}
	start := s.opts.Clock.Now()
	s.setSession(sess)
	s.attempted()
	s.log.Info("mcp server connected", zap.String("transport", s.kind), zap.Int("tools", s.toolCount()))
	err = serve(ctx, sess, ended, exited)
	return s.opts.Clock.Now().Sub(start), err
}

// transport makes the transport of one connection attempt. onConnect, called
// once the session is up, records a stdio server's pid and returns a channel
// closed when its process exits (nil, never ready, for HTTP). release frees
// what the attempt used, stopping the process, and adds how the process
// ended to the attempt's error.
func (s *server) transport() (tr sdk.Transport, onConnect func() <-chan struct{}, release func(context.Context, error) error) {
	if s.kind == "http" {
		ht, hc := httpTransport(s.cfg)
		return ht, func() <-chan struct{} { return nil }, func(_ context.Context, err error) error {
			hc.CloseIdleConnections()
			return err
		}
	}
	ct := &commandTransport{cfg: s.cfg, workspace: s.opts.Workspace, grace: s.opts.StopGrace, maxMessage: s.opts.MaxMessageBytes, log: s.log}
	onConnect = func() <-chan struct{} {
		s.setPID(ct.pid())
		return ct.exited()
	}
	release = func(ctx context.Context, err error) error {
		s.setPID(0)
		if perr := ct.stop(); perr != nil && err != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (server process: %v)", err, perr)
		}
		return err
	}
	return ct, onConnect, release
}

// serve waits for the session to end, refreshing the tool list when the
// server says it changed and checking the connection when a call failed.
func (s *server) serve(ctx context.Context, sess *sdk.ClientSession, ended <-chan error, exited <-chan struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if err == nil {
				return errors.New("the server closed the connection")
			}
			return fmt.Errorf("connection lost: %w", err)
		case <-exited:
			return errExited
		case <-s.refresh:
			if err := s.listTools(ctx, sess); err != nil {
				return err
			}
			s.log.Info("mcp tool list refreshed", zap.Int("tools", s.toolCount()))
		case <-s.check:
			pctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
			err := sess.Ping(pctx, nil)
			cancel()
			select {
			case <-exited: // the plainer reason, when it is the reason
				return errExited
			default:
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("ping after a failed call: %w", err)
			}
		}
	}
}

// listTools fetches the server's tools and brings the registry in line.
func (s *server) listTools(ctx context.Context, sess *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	var list []*sdk.Tool
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		list = append(list, t)
	}
	s.apply(list)
	return nil
}

// apply registers the listed tools that enabled_tools allows, removes the
// ones that are gone and replaces the ones whose spec changed.
func (s *server) apply(list []*sdk.Tool) {
	byRemote := make(map[string]*sdk.Tool, len(list))
	var remote []string
	for _, t := range list {
		if _, dup := byRemote[t.Name]; !dup {
			byRemote[t.Name] = t
			remote = append(remote, t.Name)
		}
	}
	names := toolNames(s.name, remote)
	enabled := s.enabledFilter(remote, names)

	want := map[string]*tool{}
	skipped := 0
	for _, r := range remote {
		if !enabled(r) {
			continue
		}
		t, err := s.newTool(byRemote[r], names[r])
		if err != nil {
			s.log.Warn("mcp tool skipped", zap.String("tool", r), zap.Error(err))
			skipped++
			continue
		}
		want[t.spec.Name] = t
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name, old := range s.tools {
		if nt, ok := want[name]; !ok || !sameTool(old, nt) {
			s.reg.Unregister(name)
			delete(s.tools, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := s.tools[name]; ok {
			continue // unchanged: keep the registered one
		}
		if err := s.reg.Register(want[name]); err != nil {
			s.log.Warn("mcp tool skipped", zap.String("tool", want[name].remote), zap.Error(err))
			skipped++
			continue
		}
		s.tools[name] = want[name]
	}
	s.skipped = skipped
}

// enabledFilter returns whether a remote tool is allowed by enabled_tools,
// which names tools by their name on the server or as the model sees them;
// empty or "*" allows all. Names that match nothing are logged.
func (s *server) enabledFilter(remote []string, names map[string]string) func(string) bool {
	allow := s.cfg.EnabledTools
	if len(allow) == 0 || slices.Contains(allow, "*") {
		return func(string) bool { return true }
	}
	for _, a := range allow {
		found := false
		for _, r := range remote {
			found = found || a == r || a == names[r]
		}
		if !found {
			s.log.Warn("enabled_tools names a tool the server does not have", zap.String("tool", a))
		}
	}
	return func(r string) bool { return slices.Contains(allow, r) || slices.Contains(allow, names[r]) }
}

// newTool builds the tool the model sees for an MCP tool.
func (s *server) newTool(t *sdk.Tool, name string) (*tool, error) {
	params, err := normalizeSchema(t.InputSchema)
	if err != nil {
		return nil, err
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	if desc == "" {
		desc = fmt.Sprintf("The %q tool of the MCP server %q.", t.Name, s.name)
	}
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	return &tool{srv: s, remote: t.Name, readOnly: readOnly,
		spec: llm.ToolSpec{Name: name, Description: clipDescription(desc), Parameters: params}}, nil
}

func sameTool(a, b *tool) bool {
	return a.remote == b.remote && a.readOnly == b.readOnly && a.spec.Name == b.spec.Name &&
		a.spec.Description == b.spec.Description && string(a.spec.Parameters) == string(b.spec.Parameters)
}

func (s *server) unregisterAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.tools {
		s.reg.Unregister(name)
	}
	clear(s.tools)
}

// current is the live session, or nil while the server is not connected.
func (s *server) current() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *server) setSession(sess *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess = sess
	if sess != nil {
		s.state, s.lastErr = StateConnected, ""
	}
}

func (s *server) setPID(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = pid
}

func (s *server) setState(st State, lastErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
	if lastErr != "" {
		s.lastErr = lastErr
	}
}

func (s *server) toolCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tools)
}

// attempted marks the end of the first connection attempt.
func (s *server) attempted() { s.triedOnce.Do(func() { close(s.tried) }) }

// suspect asks the connection loop to check the connection.
func (s *server) suspect() { signal1(s.check) }

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.name, Transport: s.kind, State: s.state, Tools: len(s.tools), Skipped: s.skipped,
		LastError: s.lastErr, PID: s.pid}
	if s.state == StateRetrying {
		st.RetryIn = max(s.nextRetry.Sub(s.opts.Clock.Now()), 0)
	}
	return st
}

// redact removes configured secrets from text that reaches the model or the
// chat (a URL with a password in an error, say).
func (s *server) redact(text string) string { return logging.Redact(text, s.opts.Secrets) }

// drain discards a pending signal.
func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// signal1 sends on a 1-buffered channel without blocking: signals coalesce.
func signal1(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
