package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// drainGrace bounds how long output is still read after the process group
// was killed. Only a process that left the group (setsid, a daemon) can keep
// the pipe open that long; its output is abandoned.
const drainGrace = 2 * time.Second

// stopGrace bounds how long a confined command's launcher may take to kill
// the command's processes when asked; then its process group is killed.
const stopGrace = 2 * time.Second

// ExecOptions are what exec needs besides its configuration.
type ExecOptions struct {
	// Secrets are values (API keys, bot tokens from the config) that must not
	// reach commands; variables holding them are removed from the
	// environment whatever their names.
	Secrets []string
	// Env is the environment to scrub and give to commands; nil means the
	// daemon's own (os.Environ()).
	Env []string
	// Confiner, when set, starts every command in the kernel sandbox
	// (internal/sandbox); nil runs them unconfined, guarded only by the
	// text heuristics of exec_guard.go.
	Confiner Confiner
	// Refuse, when set, is why every command is refused: the sandbox is
	// required and the kernel cannot provide it.
	Refuse string
}

// Confiner starts commands confined (internal/sandbox.Launcher). cleanup
// removes what Command made for the command (its private temp dir); it is
// called once the command's process group is gone.
type Confiner interface {
	Command(dir string, env []string, argv ...string) (cmd *exec.Cmd, cleanup func(), err error)
}

// Exec is the exec tool: run a shell command in the workspace.
type Exec struct {
	timeout   time.Duration
	maxOutput int
	deny      []denyRule
	ws        *workspace.Root
	env       []string
	confiner  Confiner
	refuse    string
	log       *zap.Logger
}

// NewExec returns exec. It fails when a configured deny pattern is not a
// valid regular expression. It does not look at cfg.Enabled: whoever builds
// the registry registers exec only when it is enabled.
func NewExec(cfg config.ExecConfig, ws *workspace.Root, opts ExecOptions, log *zap.Logger) (*Exec, error) {
	deny, err := compileDeny(cfg.DenyPatterns)
	if err != nil {
		return nil, err
	}
	if err := processGroupsSupported(); err != nil {
		return nil, err
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	e := &Exec{
		timeout:   cfg.Timeout,
		maxOutput: cfg.MaxOutput,
		deny:      deny,
		ws:        ws,
		env:       scrubEnv(env, opts.Secrets),
		confiner:  opts.Confiner,
		refuse:    opts.Refuse,
		log:       log,
	}
	return e, nil
}

func (e *Exec) Spec() llm.ToolSpec {
	confine := "sessions/ (the chat logs) may not be named."
	switch {
	case e.refuse != "":
		confine = "It is disabled on this machine: every command is refused."
	case e.confiner != nil:
		confine = "Commands run in a sandbox: they see the workspace (read-write), $TMPDIR (a private temporary directory, " +
			"removed after the call), system directories (read-only) and nothing else of the home directory."
	case e.ws.Restricted():
		confine = "Paths outside the workspace, \"..\" and sessions/ are refused."
	}
	return llm.ToolSpec{
		Name: "exec",
		Description: fmt.Sprintf("Run a shell command with sh -c, in the workspace directory unless working_dir is given. "+
			"Returns stdout and stderr together, then the exit code. "+
			"Stops after %s, killing the command and everything it started; background processes do not outlive the call. "+
			"Output beyond %d bytes is cut in the middle (the start and the end are kept): redirect large output to a file. "+
			"There is no input: use non-interactive flags. Destructive commands (wiping disks or /, shutdown, ...) are refused. %s",
			e.timeout, e.maxOutput, confine),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command line."},
    "working_dir": {"type": "string", "description": "Directory to run in, relative to the workspace. Default: the workspace."}
  },
  "required": ["command"]
}`),
	}
}

type execArgs struct {
	Command    string `json:"command"`
	WorkingDir string `json:"working_dir"`
}

func (e *Exec) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[execArgs]("exec", inv)
	if err != nil {
		return Result{}, err
	}
	command := strings.TrimSpace(a.Command)
	if command == "" {
		return errorResult("command is empty."), nil
	}
	if e.refuse != "" {
		return errorResult("Refused: " + e.refuse + ". Ask the user to run the command themselves."), nil
	}
	wd, dir := ".", e.ws.Dir()
	if a.WorkingDir != "" {
		where, err := e.ws.Resolve(a.WorkingDir)
		if err != nil {
			return Result{}, err
		}
		if fi, err := e.ws.Stat(a.WorkingDir); err != nil {
			return Result{}, err
		} else if !fi.IsDir() {
			return errorResult(fmt.Sprintf("working_dir %s is not a directory.", a.WorkingDir)), nil
		}
		wd, dir = where, where
		if !filepath.IsAbs(where) {
			dir = filepath.Join(e.ws.Dir(), where)
		}
	}
	if reason := checkDenied(command, e.deny, wd == "."); reason != "" {
		logging.From(ctx, e.log).Info("exec refused", zap.String("reason", reason))
		return errorResult(fmt.Sprintf("Refused: this command %s. If it is really needed, ask the user to run it themselves.", reason)), nil
	}
	// In the sandbox the kernel decides what a path may reach; the text
	// check would only refuse what the sandbox allows (/etc/hosts).
	if err := e.checkPaths(command, wd); err != nil {
		logging.From(ctx, e.log).Info("exec refused", zap.Error(err))
		return errorResult(err.Error()), nil
	}
	return e.run(ctx, command, dir)
}

// run starts the command in a process group of its own and waits for it, the
// timeout or ctx, whichever comes first. Then the whole group is killed:
// after a timeout that stops the command and its children; after a normal
// exit it stops background jobs that would otherwise keep running (and keep
// the output pipe open).
func (e *Exec) run(ctx context.Context, command, dir string) (Result, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("exec: pipe: %w", err)
	}
	defer func() { _ = pr.Close() }()
	cmd, cleanup, err := e.command(dir, "/bin/sh", "-c", command)
	if err != nil {
		_ = pw.Close()
		return Result{}, fmt.Errorf("exec: %w", err)
	}
	defer cleanup()                 // after the process group is killed, below
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe keeps stdout and stderr in order
	setProcessGroup(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		return Result{}, fmt.Errorf("exec: start: %w", err)
	}
	_ = pw.Close() // the children hold the only write ends now

	out := newHeadTail(e.maxOutput)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(out, pr) // ends at EOF or the read deadline set below
	}()
	// Wait's error is the exit status, which the result reads from
	// cmd.ProcessState below.
	waitDone := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waitDone) }()

	timer := time.NewTimer(e.timeout)
	defer timer.Stop()
	stopped, exited := "", false
	select {
	case <-waitDone:
		exited = true
	case <-timer.C:
		stopped = fmt.Sprintf("timed out after %s", e.timeout)
	case <-ctx.Done():
		stopped = "cancelled"
		// The call's own deadline (agents.tool_timeout, when shorter than
		// the tool's) is a timeout too: the model and the user are told
		// so whichever of this and the registry's answer arrives first.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			stopped = fmt.Sprintf("timed out after %s", time.Since(start).Round(time.Millisecond))
		}
	}
	if !exited && e.confiner != nil {
		// The launcher kills the whole tree, also what left the process
		// group (docs/tools.md#processes); the group's SIGKILL below is
		// the last resort should it not answer.
		if err := askToStop(cmd.Process.Pid); err != nil {
			logging.From(ctx, e.log).Warn("exec: stop the launcher", zap.Int("pid", cmd.Process.Pid), zap.Error(err))
		}
		grace := time.NewTimer(stopGrace)
		select {
		case <-waitDone:
			exited = true
		case <-grace.C:
		}
		grace.Stop()
	}
	// After a normal exit the launcher has already killed what the command
	// left (confined); unconfined, this stops what stayed in the group.
	if err := killProcessGroup(cmd.Process.Pid); err != nil {
		logging.From(ctx, e.log).Warn("exec: kill process group", zap.Int("pgid", cmd.Process.Pid), zap.Error(err))
	}
	if !exited {
		<-waitDone
	}
	_ = pr.SetReadDeadline(time.Now().Add(drainGrace))
	<-readDone

	logging.From(ctx, e.log).Debug("exec finished", zap.Duration("elapsed", time.Since(start)), zap.String("stopped", stopped))
	text := out.String()
	if text == "" {
		text = "(no output)"
	}
	if stopped != "" {
		return errorResult(fmt.Sprintf("%s\n[%s: the command and everything it started were killed]", text, stopped)), nil
	}
	return Result{Text: fmt.Sprintf("%s\n[%s]", text, exitStatus(cmd.ProcessState))}, nil
}

// command builds the command, confined when a Confiner is set.
func (e *Exec) command(dir string, argv ...string) (*exec.Cmd, func(), error) {
	if e.confiner != nil {
		return e.confiner.Command(dir, e.env, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = e.env
	return cmd, func() {}, nil
}

func (e *Exec) checkPaths(command, wd string) error {
	if e.confiner != nil {
		return nil
	}
	return checkPaths(command, e.ws, wd)
}

// headTail keeps the first and last bytes of a stream and counts the rest,
// so a command printing gigabytes costs a few kilobytes of memory.
type headTail struct {
	headMax, tailMax int
	head, tail       []byte
	total            int64
}

func newHeadTail(max int) *headTail {
	return &headTail{headMax: max / 2, tailMax: max - max/2}
}

func (h *headTail) Write(p []byte) (int, error) {
	h.total += int64(len(p))
	rest := p
	if n := min(h.headMax-len(h.head), len(rest)); n > 0 {
		h.head = append(h.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		h.tail = append(h.tail, rest...)
		if len(h.tail) > h.tailMax {
			h.tail = append(h.tail[:0], h.tail[len(h.tail)-h.tailMax:]...)
		}
	}
	return len(p), nil
}

// String returns the kept output as valid UTF-8, with a marker where bytes
// were dropped.
func (h *headTail) String() string {
	cut := h.total - int64(len(h.head)) - int64(len(h.tail))
	if cut == 0 {
		return strings.ToValidUTF8(string(h.head)+string(h.tail), "\uFFFD")
	}
	head, tail := h.head, h.tail
	// Do not show half a character at either side of the gap.
	if i := lastRuneStart(head); i < len(head) && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n\n[... %d bytes of output cut ...]\n\n%s",
		strings.ToValidUTF8(string(head), "\uFFFD"), cut, strings.ToValidUTF8(string(tail), "\uFFFD"))
}

func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// errNoProcessGroups is returned by NewExec where process groups do not exist.
var errNoProcessGroups = errors.New("exec: this operating system has no process groups; the exec tool needs them to stop commands reliably")
