package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-telegram/bot/models"
	"go.yaml.in/yaml/v3"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// setup says how one gateway run is configured.
type setup struct {
	// Discord also enables the Discord channel against the Discord fake.
	Discord bool
	// Streaming turns on streaming by edits for Telegram.
	Streaming bool
	// MaxConcurrentTurns overrides agents.max_concurrent_turns when > 0.
	MaxConcurrentTurns int
	// ContextWindow overrides agents.context_window when > 0.
	ContextWindow int
	// MemoryWindow overrides agents.memory_window when > 0.
	MemoryWindow int
	// Seed runs before the gateway starts, on the fresh sessions dir
	// (agents.sessions_dir's default: sessions/ next to the config file).
	Seed func(sessionsDir string) error
	// API turns on the OpenAI-compatible API with the key benchAPIKey and
	// limits no load reaches.
	API bool
	// WebToken sets channels.web.token (the page is served on loopback
	// by default; the token only matters to who logs in).
	WebToken string
	// Workers > 0 splits the gateway over NATS (docs/scale-out.md): an
	// embedded NATS server, one --role channels process (the one measured
	// and probed) and this many --role agent processes.
	Workers int
	// Sessions is bus.nats.sessions with Workers > 0 ("" leaves the default).
	Sessions string
	// MaxGroupTurns overrides agents.max_group_turns when > 0.
	MaxGroupTurns int
}

// harness is one gateway run: a fresh HOME with a config, the fakes it
// talks to, and the child process. Close stops all of them.
type harness struct {
	bin    string
	dir    string
	keep   bool
	tb     *fakes.Standalone
	tg     *telegramfake.Server
	dc     *discordfake.Server
	llm    *openaifake.Server
	script *fakellm.Script
	listen string
	logf   *os.File

	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	waitErr error

	replies replyRouter
	polls   pollWatch
	pin     *pinning // nil: the gateway runs where the scheduler puts it
	godebug string   // the gateway's GODEBUG (-godebug)
	// valgrind, when set, runs the gateway under one of valgrind's tools.
	valgrind valgrindTool
	// extraFiles are passed to the gateway from descriptor 3 on (a valgrind
	// tool's log).
	extraFiles []*os.File

	// nats and workers exist with setup.Workers.
	nats    *natsfake.Server
	workers []*exec.Cmd
	workerN int
}

// newHarness prepares a run in a fresh temporary directory: fakes started,
// config written, workspace seeded. The gateway is not started yet.
func newHarness(bin string, s setup, keep bool) (h *harness, err error) {
	dir, err := os.MkdirTemp("", "nanobot-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	h = &harness{
		bin: bin, dir: dir, keep: keep,
		tb:     &fakes.Standalone{Log: log.New(io.Discard, "", 0)},
		script: &fakellm.Script{Discard: true},
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	h.tg = telegramfake.New(h.tb)
	h.tg.Stream(h.observe)
	h.llm = openaifake.New(h.tb, h.script)
	if s.Discord {
		h.dc = discordfake.New(h.tb, discordfake.Options{})
	}
	if h.listen, err = freeAddr(); err != nil {
		return h, err
	}
	if s.Workers > 0 {
		h.nats = natsfake.Start(h.tb, filepath.Join(dir, "nats"))
		h.workerN = s.Workers
	}
	ws := filepath.Join(dir, "workspace")
	if s.Seed != nil {
		if err := s.Seed(filepath.Join(filepath.Dir(h.configPath()), "sessions")); err != nil {
			return h, fmt.Errorf("seed sessions: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(h.configPath()), 0o700); err != nil {
		return h, fmt.Errorf("config dir: %w", err)
	}
	if err := os.WriteFile(h.configPath(), h.config(s, ws), 0o600); err != nil {
		return h, fmt.Errorf("write config: %w", err)
	}
	if h.logf, err = os.Create(filepath.Join(dir, "gateway.log")); err != nil {
		return h, fmt.Errorf("gateway log: %w", err)
	}
	return h, nil
}

func (h *harness) configPath() string { return filepath.Join(h.dir, ".nanobot", "config.yaml") }

// config is the gateway's configuration: defaults everywhere except what
// points it at the fakes and what the scenario sets. Access is open to every
// user id ("*") and group chats are answered without a mention, because the
// load comes from many generated users in many groups.
func (h *harness) config(s setup, ws string) []byte {
	agents := map[string]any{"workspace": ws, "model": "openai/gpt-4o-mini"}
	if s.MaxConcurrentTurns > 0 {
		agents["max_concurrent_turns"] = s.MaxConcurrentTurns
	}
	if s.ContextWindow > 0 {
		agents["context_window"] = s.ContextWindow
	}
	if s.MemoryWindow > 0 {
		agents["memory_window"] = s.MemoryWindow
	}
	if s.MaxGroupTurns > 0 {
		agents["max_group_turns"] = s.MaxGroupTurns
	}
	channels := map[string]any{
		"telegram": map[string]any{
			"enabled": true, "token": telegramfake.Token, "api_url": h.tg.URL(),
			"allow_from": []string{"*"}, "group_policy": "open", "streaming": s.Streaming,
		},
	}
	if h.dc != nil {
		channels["discord"] = map[string]any{
			"enabled": true, "token": h.dc.Token(), "api_url": h.dc.URL(), "allow_from": []string{"*"},
		}
	}
	if s.WebToken != "" {
		channels["web"] = map[string]any{"token": s.WebToken}
	}
	cfg := map[string]any{
		"agents":    agents,
		"providers": map[string]any{"openai": map[string]any{"api_key": openaifake.DefaultAPIKey, "base_url": h.llm.URL()}},
		"channels":  channels,
		"gateway":   map[string]any{"listen": h.listen},
		"log":       map[string]any{"format": "json"},
	}
	if s.API {
		cfg["api"] = map[string]any{"keys": map[string]any{"bench": benchAPIKey},
			"rate_per_minute": 100_000_000, "burst": 1_000_000, "max_concurrent": 100_000}
	}
	if h.nats != nil {
		nc := map[string]any{"url": h.nats.URL(), "partitions": 64}
		if s.Sessions != "" {
			nc["sessions"] = s.Sessions
		}
		cfg["bus"] = map[string]any{"backend": "nats", "nats": nc}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		panic(fmt.Sprintf("marshal config: %v", err)) // plain maps of strings, ints and bools always marshal
	}
	return out
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// start runs `nanobot gateway` with the config. The child dies with the
// bench (Pdeathsig) so an interrupted run leaves nothing behind.
func (h *harness) start(pprofAddr string) error {
	args := []string{"--config", h.configPath(), "gateway"}
	if h.nats != nil {
		args = append(args, "--role", "channels")
		if err := h.startWorkers(); err != nil {
			return err
		}
	}
	name, godebug := h.bin, h.godebug
	if h.valgrind != nil {
		name, args = h.valgrind.command(h.bin, args)
		godebug = strings.Trim(valgrindGodebug+","+godebug, ",")
	}
	cmd := exec.Command(name, args...)
	cmd.Env = h.environ()
	if pprofAddr != "" {
		cmd.Env = append(cmd.Env, "NANOBOT_PPROF_ADDR="+pprofAddr)
	}
	if godebug != "" {
		cmd.Env = append(cmd.Env, "GODEBUG="+godebug)
	}
	if h.valgrind != nil {
		cmd.Env = append(cmd.Env, valgrindMaxprocs)
	}
	cmd.ExtraFiles = h.extraFiles
	cmd.Stdout, cmd.Stderr = h.logf, h.logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	h.exited = make(chan struct{})
	// The fake reports a call when it is answered, and an empty long poll
	// is answered only at its timeout. An update the gateway ignores (no
	// message in it) makes the first getUpdates answer at once, so its
	// arrival time is seen as soon as it happens.
	h.tg.PushUpdate(models.Update{})
	h.started = time.Now()
	h.polls.reset(h.started)
	if h.pin != nil {
		err := h.pin.startPinned(cmd.Start)
		if err != nil {
			return fmt.Errorf("start %s: %w", h.bin, err)
		}
		if n, err := gatewayCPUs(cmd.Process.Pid); err != nil || n != 1 {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("gateway not pinned to one CPU (%d CPUs): %v", n, err)
		}
	} else if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", h.bin, err)
	}
	h.cmd = cmd
	go func() {
		h.waitErr = cmd.Wait()
		close(h.exited)
	}()
	return nil
}

func (h *harness) pid() int { return h.cmd.Process.Pid }

// startWorkers starts the --role agent processes, each on its own listen
// address, logging to the gateway log.
// environ is a gateway process's environment: its own HOME, the PATH, and
// GORACE when the bench has one (its tests run a race-built gateway and say
// how it ends: internal/testkit/gobuild.Env), then extra.
func (h *harness) environ(extra ...string) []string {
	env := []string{"HOME=" + h.dir, "PATH=" + os.Getenv("PATH")}
	if v, ok := os.LookupEnv("GORACE"); ok {
		env = append(env, "GORACE="+v)
	}
	return append(env, extra...)
}

func (h *harness) startWorkers() error {
	for range h.workerN {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		cmd := exec.Command(h.bin, "--config", h.configPath(), "gateway", "--role", "agent")
		cmd.Env = h.environ("NANOBOT_GATEWAY_LISTEN=" + addr)
		cmd.Stdout, cmd.Stderr = h.logf, h.logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		h.workers = append(h.workers, cmd)
	}
	return nil
}

// stopWorkers stops the workers (SIGTERM, then SIGKILL after grace).
func (h *harness) stopWorkers(grace time.Duration) {
	for _, w := range h.workers {
		_ = w.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = w.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			_ = w.Process.Kill()
			<-done
		}
	}
	h.workers = nil
}

// ready is what startup measured: from the exec of the process to /healthz
// answering 200 and to the first getUpdates (Telegram can deliver).
type ready struct {
	Healthz, FirstPoll time.Duration
}

// awaitReady polls /healthz every millisecond and waits for the first
// getUpdates and, with Discord enabled, for its READY.
func (h *harness) awaitReady(ctx context.Context, timeout time.Duration) (ready, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r ready
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + h.listen + "/healthz"
	healthy := func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if err := h.poll(ctx, healthy, "/healthz not answering", timeout); err != nil {
		return r, err
	}
	r.Healthz = time.Since(h.started)
	select {
	case <-h.polls.seen():
		r.FirstPoll = h.polls.at().Sub(h.started)
	case <-h.exited:
		return r, h.exitError()
	case <-ctx.Done():
		return r, fmt.Errorf("gateway: no getUpdates after %v (log: %s)", timeout, h.logf.Name())
	}
	if h.dc != nil {
		discordReady := func() bool { st := h.dc.Stats(); return st.Identifies > 0 && st.Live > 0 }
		if err := h.poll(ctx, discordReady, "no Discord READY", timeout); err != nil {
			return r, err
		}
	}
	return r, nil
}

// poll checks done every millisecond until it holds, the gateway exits or
// ctx ends (the error then says what was missing after timeout).
func (h *harness) poll(ctx context.Context, done func() bool, missing string, timeout time.Duration) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-h.exited:
			return h.exitError()
		case <-ctx.Done():
			return fmt.Errorf("gateway: %s after %v (log: %s)", missing, timeout, h.logf.Name())
		}
	}
	return nil
}

func (h *harness) exitError() error {
	return fmt.Errorf("gateway exited early: %v (log: %s)", h.waitErr, h.logf.Name())
}

// stop sends SIGTERM and waits for a clean exit, killing the process after
// the grace period.
func (h *harness) stop(grace time.Duration) error {
	if h.cmd == nil {
		return nil
	}
	select {
	case <-h.exited:
		return h.exitError()
	default:
	}
	h.stopWorkers(grace)
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
		if h.waitErr != nil {
			return fmt.Errorf("gateway exit: %w (log: %s)", h.waitErr, h.logf.Name())
		}
		return nil
	case <-time.After(grace):
		_ = h.cmd.Process.Kill()
		<-h.exited
		return fmt.Errorf("gateway did not stop within %v of SIGTERM; killed (log: %s)", grace, h.logf.Name())
	}
}

// Close stops the gateway if it runs, the fakes, and removes the directory
// unless asked to keep it.
func (h *harness) Close() {
	h.stopWorkers(0)
	if h.cmd != nil {
		select {
		case <-h.exited:
		default:
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	}
	h.tb.Close()
	if h.logf != nil {
		_ = h.logf.Close()
	}
	if !h.keep {
		_ = os.RemoveAll(h.dir)
	}
}

// observe sees every Telegram call as the fake answers it.
func (h *harness) observe(c telegramfake.Call) {
	switch c.Method {
	case "getUpdates":
		h.polls.observe(c.At)
	case "sendMessage", "editMessageText":
		if c.Status != http.StatusOK {
			return
		}
		chat, err := strconv.ParseInt(c.Params["chat_id"], 10, 64)
		if err != nil {
			return
		}
		h.replies.deliver(chat, sent{At: c.At, Text: c.Params["text"], Edit: c.Method == "editMessageText"})
	}
}

// pollWatch notes the first getUpdates of the current process: a poll of a
// process stopped earlier may still be answered late, so only polls that
// arrived after the start count.
type pollWatch struct {
	mu    sync.Mutex
	after time.Time
	first time.Time
	ch    chan struct{}
}

func (p *pollWatch) reset(after time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.after, p.first, p.ch = after, time.Time{}, make(chan struct{})
}

func (p *pollWatch) observe(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil || !p.first.IsZero() || at.Before(p.after) {
		return
	}
	p.first = at
	close(p.ch)
}

// seen is closed at the first poll after the start.
func (p *pollWatch) seen() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch
}

func (p *pollWatch) at() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// sent is a message the gateway sent or edited.
type sent struct {
	At   time.Time
	Text string
	Edit bool
}

// replyRouter hands what the gateway sends to a chat to whoever waits on it.
type replyRouter struct {
	mu    sync.Mutex
	chats map[int64]chan sent
}

// listen returns the channel a chat's messages arrive on.
func (r *replyRouter) listen(chat int64) <-chan sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chats == nil {
		r.chats = map[int64]chan sent{}
	}
	ch, ok := r.chats[chat]
	if !ok {
		ch = make(chan sent, 64)
		r.chats[chat] = ch
	}
	return ch
}

func (r *replyRouter) deliver(chat int64, s sent) {
	r.mu.Lock()
	ch := r.chats[chat]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- s:
	default: // nobody reads this chat any more; a load driver never lags 64 messages
	}
}
