package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
)

// inheritedEnv are the variables a stdio server inherits from the daemon,
// the same short list the reference MCP SDKs pass: enough to find programs
// and a home directory, and none of the daemon's keys and tokens. Anything
// else a server needs goes in its env setting.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// commandTransport starts a stdio server in its own process group and talks
// to it over stdin/stdout. Close closes stdin, waits for the server to exit,
// then signals the whole group (SIGTERM, then SIGKILL), so neither the
// server nor anything it started outlives the connection; the server is
// always reaped.
type commandTransport struct {
	cfg       config.MCPServerConfig
	workspace string        // the working directory when cwd is unset, and the base of a relative one
	grace     time.Duration // between closing stdin, SIGTERM and SIGKILL
	// maxMessage bounds one message read from the server (0: the SDK's).
	maxMessage int
	log        *zap.Logger

	mu   sync.Mutex
	proc *process // set by Connect
}

var _ sdk.Transport = (*commandTransport)(nil)

// Connect starts the command.
func (t *commandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	cmd := exec.Command(t.cfg.Command, t.cfg.Args...)
	cmd.Env = serverEnv(os.Environ(), t.cfg.Env)
	cmd.Dir = workDir(t.cfg.Cwd, t.workspace)
	setProcessGroup(cmd)
	tail := &stderrTail{log: t.log}
	cmd.Stderr = tail
	// Should something outside the process group keep stderr open, reaping
	// the server does not wait for it longer than this.
	cmd.WaitDelay = t.grace
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	// stdout is a pipe of our own rather than cmd.StdoutPipe, which cmd.Wait
	// would close under the reader's feet: the process's last words are
	// read to the end, and the read end is closed only when the connection
	// is.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	_ = w.Close() // the child has its copy
	if err != nil {
		_ = stdout.Close()
		_ = stdin.Close()
		return nil, fmt.Errorf("start %s: %w", t.cfg.Command, err)
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, stderr: tail, grace: t.grace, exited: make(chan struct{})}
	// The waiter ends with the process, which Close guarantees.
	go p.wait()
	t.mu.Lock()
	t.proc = p
	t.mu.Unlock()
	t.log.Info("mcp server started", zap.Int("pid", cmd.Process.Pid), zap.String("command", t.cfg.Command))
	// The SDK closes the connection by closing its writer, p: that closes
	// stdin and stops the process.
	return (&sdk.IOTransport{Reader: io.NopCloser(stdout), Writer: p, MaxLineLength: t.maxMessage}).Connect(ctx)
}

// stop ends the process, if one was started, and returns how it ended.
// It is idempotent and safe to call after the SDK closed the connection.
func (t *commandTransport) stop() error {
	p := t.process()
	if p == nil {
		return nil
	}
	_ = p.Close()
	return p.exitErr
}

// exited is closed when the started process has exited (nil before Connect).
func (t *commandTransport) exited() <-chan struct{} {
	if p := t.process(); p != nil {
		return p.exited
	}
	return nil
}

// pid is the process id of the started server, or 0.
func (t *commandTransport) pid() int {
	if p := t.process(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

func (t *commandTransport) process() *process {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.proc
}

// process is a started stdio server; as an io.WriteCloser it is the
// server's stdin, and closing it stops the server.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	stderr *stderrTail
	grace  time.Duration

	exited  chan struct{} // closed once the process is reaped
	exitErr error         // how it ended, set before exited closes

	once sync.Once
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// wait reaps the process when it exits, killing what it left behind in its
// process group.
func (p *process) wait() {
	err := reap(p.cmd)
	if err == nil {
		err = errors.New("exited")
	}
	if tail := p.stderr.String(); tail != "" {
		err = fmt.Errorf("%w; stderr: %s", err, tail)
	}
	p.exitErr = err
	close(p.exited)
}

// Close asks the server to exit by closing its stdin, as the MCP spec says,
// then escalates to SIGTERM and SIGKILL of its process group, one grace
// period apart. It returns once the server is reaped.
func (p *process) Close() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		pid := p.cmd.Process.Pid
		for _, s := range []sig{sigTerm, sigKill} {
			t := time.NewTimer(p.grace)
			select {
			case <-p.exited:
			case <-t.C:
				signalGroup(pid, s)
			}
			t.Stop()
		}
		<-p.exited
		// Unblocks the SDK's reader should something outside the group
		// still hold the pipe open.
		_ = p.stdout.Close()
	})
	return nil
}

// stderrTail logs a server's stderr line by line (at debug: servers write
// their chatter there) and keeps the last lines, which say why it died.
type stderrTail struct {
	log *zap.Logger

	mu      sync.Mutex
	partial []byte
	lines   []string
}

const (
	tailLines   = 5
	maxLineSize = 500
)

func (s *stderrTail) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, b...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			if len(s.partial) > maxLineSize {
				s.add(string(s.partial[:maxLineSize]))
				s.partial = s.partial[:0]
			}
			return len(b), nil
		}
		s.add(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
}

func (s *stderrTail) add(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > maxLineSize {
		line = line[:maxLineSize]
	}
	if strings.TrimSpace(line) == "" {
		return
	}
	s.log.Debug("mcp server stderr", zap.String("line", line))
	s.lines = append(s.lines, line)
	if len(s.lines) > tailLines {
		s.lines = s.lines[1:]
	}
}

// String returns the last lines, joined by " | ".
func (s *stderrTail) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, " | ")
}

// serverEnv is the inherited subset of environ plus the configured env.
func serverEnv(environ []string, extra map[string]string) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, keep := range inheritedEnv {
			if name == keep {
				env = append(env, kv)
			}
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v) // later entries win in exec.Cmd
	}
	return env
}

// workDir is where a stdio server runs: cwd with a leading ~ expanded,
// relative to the workspace; the workspace itself when cwd is empty.
func workDir(cwd, workspace string) string {
	if cwd == "~" || strings.HasPrefix(cwd, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			cwd = filepath.Join(home, cwd[1:])
		}
	}
	if filepath.IsAbs(cwd) || workspace == "" {
		return cwd
	}
	return filepath.Join(workspace, cwd)
}

// httpTransport reaches a streamable HTTP server, sending the configured
// headers (Authorization...) with every request.
func httpTransport(cfg config.MCPServerConfig) (*sdk.StreamableClientTransport, *http.Client) {
	hc := &http.Client{Transport: &headerTransport{headers: cfg.Headers, base: http.DefaultTransport.(*http.Transport).Clone()}}
	return &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc}, hc
}

// headerTransport adds fixed headers to each request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(req)
}
