package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/gobuild"
)

// binary is the nanobot binary built once for the end-to-end tests, which
// run it exactly as a user does.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nanobot-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "nanobot")
	if runtime.GOOS == "windows" {
		binary += ".exe"
	}
	// Built as this test binary was (with -race under -race), so the
	// build cache already holds every package it needs.
	if err := gobuild.Build("", binary, "."); err != nil {
		panic("build nanobot: " + err.Error())
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// env is one user's machine: a HOME with nanobot onboarded, pointed at a
// fake OpenAI server.
type env struct {
	t      *testing.T
	home   string
	script *fakellm.Script
	llm    *openaifake.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), script: &fakellm.Script{}}
	e.llm = openaifake.New(t, e.script)
	out, _, err := e.run("onboard")
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	return e
}

func (e *env) workspace() string { return filepath.Join(e.home, ".nanobot", "workspace") }

// sessions is the sessions dir: agents.sessions_dir's default, next to the
// config file, outside the workspace.
func (e *env) sessions() string { return filepath.Join(e.home, ".nanobot", "sessions") }

// run runs the binary with the user's environment and returns stdout, stderr.
func (e *env) run(args ...string) (string, string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = e.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// environ is the user's environment: HOME, PATH, the fake's key and URL,
// then extra (later entries win).
func (e *env) environ(extra ...string) []string {
	vars := append([]string{
		"HOME=" + e.home, "PATH=" + os.Getenv("PATH"),
		"OPENAI_API_KEY=" + openaifake.DefaultAPIKey,
	}, gobuild.Env()...)
	if e.llm != nil {
		vars = append(vars, "NANOBOT_PROVIDERS_OPENAI_BASE_URL="+e.llm.URL())
	}
	return append(vars, extra...)
}

// sessionLines returns the decoded lines of the CLI session file.
func (e *env) sessionLines() []map[string]any {
	e.t.Helper()
	f, err := os.Open(filepath.Join(e.sessions(), "cli_local.jsonl"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			e.t.Fatalf("session line is not JSON: %v: %s", err, sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

// messages returns the role and the JSON of each message line.
func messages(lines []map[string]any) (roles []string, raw []string) {
	for _, l := range lines {
		if l["type"] != "message" {
			continue
		}
		m := l["message"].(map[string]any)
		roles = append(roles, m["role"].(string))
		b, _ := json.Marshal(m)
		raw = append(raw, string(b))
	}
	return roles, raw
}

func TestOnboardWritesConfigAndWorkspaceWithoutOverwriting(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.home, ".nanobot", "config.yaml")
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", fi.Mode().Perm())
	}
	for _, f := range []string{"AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "HEARTBEAT.md", "memory/MEMORY.md", "memory/HISTORY.md", "skills"} {
		if _, err := os.Stat(filepath.Join(e.workspace(), f)); err != nil {
			t.Errorf("workspace lacks %s: %v", f, err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.workspace(), "SOUL.md"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(mustRead(t, cfg), []byte("\n# edited\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := e.run("onboard")
	if err != nil {
		t.Fatalf("second onboard: %v", err)
	}
	if string(mustRead(t, filepath.Join(e.workspace(), "SOUL.md"))) != "mine" || !strings.Contains(string(mustRead(t, cfg)), "# edited") {
		t.Error("onboard overwrote a file")
	}
	if !strings.Contains(out, "exists") {
		t.Errorf("second onboard should say the config exists:\n%s", out)
	}
}

func TestAgentOneShotPersistsTheTurn(t *testing.T) {
	e := newEnv(t)
	e.script.Push(fakellm.Reply{Text: "Hello from the model!"})
	out, stderr, err := e.run("agent", "-m", "hello")
	if err != nil {
		t.Fatalf("agent: %v\nstderr: %s", err, stderr)
	}
	if strings.TrimSpace(out) != "Hello from the model!" {
		t.Errorf("stdout = %q", out)
	}
	roles, raw := messages(e.sessionLines())
	if strings.Join(roles, ",") != "user,assistant" || !strings.Contains(raw[0], "hello") || !strings.Contains(raw[1], "Hello from the model!") {
		t.Errorf("session = %v %v", roles, raw)
	}
	if req := e.script.Requests()[0]; req.Model != "gpt-4o-mini" || !strings.Contains(req.System, "AGENTS.md") {
		t.Errorf("request model %q, system prompt without bootstrap files", req.Model)
	}
}

func TestAgentToolTurnThenHistory(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.workspace(), "notes.md"), []byte("dentist on friday"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path":"notes.md"}`}}},
		fakellm.Reply{Text: "Your note: dentist on friday."},
	)
	out, stderr, err := e.run("agent", "-m", "what is in notes.md?")
	if err != nil || !strings.Contains(out, "dentist on friday") {
		t.Fatalf("agent: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	roles, raw := messages(e.sessionLines())
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("roles = %v", roles)
	}
	if !strings.Contains(raw[1], `"tool_call"`) || !strings.Contains(raw[1], "read_file") ||
		!strings.Contains(raw[2], `"tool_result"`) || !strings.Contains(raw[2], "dentist on friday") ||
		!strings.Contains(raw[3], "Your note") {
		t.Errorf("session lines:\n%s", strings.Join(raw, "\n"))
	}

	e.script.Push(fakellm.Reply{Text: "Friday it is."})
	if _, stderr, err := e.run("agent", "-m", "when again?"); err != nil {
		t.Fatalf("second agent: %v\n%s", err, stderr)
	}
	reqs := e.script.Requests()
	last := reqs[len(reqs)-1]
	if len(last.Messages) != 5 || !strings.Contains(last.Messages[0].Text, "what is in notes.md?") || last.Messages[2].ToolResults[0].CallID != "call_1" {
		t.Errorf("second run did not send the earlier turn as history: %+v", last.Messages)
	}
}

func TestTornSessionLineIsTolerated(t *testing.T) {
	e := newEnv(t)
	e.script.Push(fakellm.Reply{Text: "first"})
	if _, stderr, err := e.run("agent", "-m", "one"); err != nil {
		t.Fatalf("agent: %v\n%s", err, stderr)
	}
	path := filepath.Join(e.sessions(), "cli_local.jsonl")
	data := mustRead(t, path)
	// Cut the last line in half, as a crash mid-write would.
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	cut := data[:lastStart+(len(data)-lastStart)/2]
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	e.script.Push(fakellm.Reply{Text: "second"})
	out, stderr, err := e.run("agent", "-m", "two")
	if err != nil || strings.TrimSpace(out) != "second" {
		t.Fatalf("agent after a torn line: %v\nstdout %q\nstderr %s", err, out, stderr)
	}
	if !strings.Contains(strings.ToLower(stderr), "torn") {
		t.Errorf("no warning about the torn line:\n%s", stderr)
	}
	roles, _ := messages(e.sessionLines()) // every line parses
	if strings.Join(roles, ",") != "user,user,assistant" {
		t.Errorf("roles after repair = %v (the torn assistant line is set aside)", roles)
	}
}

func TestInvalidConfigExitsNamingTheKey(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"bad yaml", "agents:\n  model: [unclosed\n", "config.yaml"},
		{"empty model", "agents:\n  model: \"\"\n", "agents.model"},
		{"unknown provider", "agents:\n  model: nosuch/model-x\n", "agents.model"},
		{"unknown key", "agents:\n  modle: openai/gpt-4o\n", "agents.modle"},
		{"empty allowlist", "channels:\n  telegram:\n    enabled: true\n    token: \"123:abc\"\n", "channels.telegram.allow_from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{t: t, home: t.TempDir()}
			path := filepath.Join(e.home, "config.yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			out, stderr, err := e.run("--config", path, "agent", "-m", "hi")
			if err == nil {
				t.Fatalf("agent accepted an invalid config; stdout %q", out)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("error does not name %q:\n%s", tt.want, stderr)
			}
		})
	}
}

func TestMissingConfigSaysOnboard(t *testing.T) {
	e := &env{t: t, home: t.TempDir()}
	_, stderr, err := e.run("agent", "-m", "hi")
	if err == nil || !strings.Contains(stderr, "onboard") {
		t.Errorf("err %v, stderr %s", err, stderr)
	}
}

func TestVersionAndStatus(t *testing.T) {
	e := newEnv(t)
	out, _, err := e.run("version")
	if err != nil || !strings.HasPrefix(out, "nanobot ") {
		t.Errorf("version: %v %q", err, out)
	}
	e.script.Push(fakellm.Reply{Text: "hi"})
	if _, stderr, err := e.run("agent", "-m", "hello"); err != nil {
		t.Fatal(err, stderr)
	}
	out, stderr, err := e.run("status")
	if err != nil {
		t.Fatalf("status: %v %s", err, stderr)
	}
	for _, want := range []string{"openai/gpt-4o-mini", "api key set", "Channel telegram", "disabled", "Channel web", "http://127.0.0.1:18790/ (`nanobot web token`", "Sessions", "cli:local"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, openaifake.DefaultAPIKey) {
		t.Error("status printed the API key")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOldWorkspaceSessionsMoveAtStart: a user upgrading from a version that
// kept sessions in <workspace>/sessions/ finds them in the sessions dir after
// the next start, with the conversation carrying on; status says so before,
// and the move is logged (issue 30, docs/sessions.md).
func TestOldWorkspaceSessionsMoveAtStart(t *testing.T) {
	e := newEnv(t)
	e.script.Push(fakellm.Reply{Text: "first"})
	if _, stderr, err := e.run("agent", "-m", "remember the blue door"); err != nil {
		t.Fatalf("agent: %v\n%s", err, stderr)
	}
	// Put the session where the old version kept it. The old version never
	// wrote the marker of the one-time move; this one did at its first start.
	old := filepath.Join(e.workspace(), "sessions")
	if err := os.Rename(e.sessions(), old); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(e.home, ".nanobot", "sessions-moved.json")
	if err := os.Remove(marker); err != nil {
		t.Fatalf("the first start did not mark the move done: %v", err)
	}
	want := mustRead(t, filepath.Join(old, "cli_local.jsonl"))
	if out, _, err := e.run("status"); err != nil || !strings.Contains(out, old+" still exists") {
		t.Errorf("status before the move: %v\n%s", err, out)
	}
	e.script.Push(fakellm.Reply{Text: "the blue one"})
	out, stderr, err := e.run("agent", "-m", "which door?")
	if err != nil || strings.TrimSpace(out) != "the blue one" {
		t.Fatalf("agent after the upgrade: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "moved sessions out of the workspace") {
		t.Errorf("the move was not logged:\n%s", stderr)
	}
	reqs := e.script.Requests()
	if last := reqs[len(reqs)-1]; len(last.Messages) < 3 || !strings.Contains(last.Messages[0].Text, "blue door") {
		t.Errorf("the moved session was not the conversation's history: %+v", last.Messages)
	}
	if _, err := os.Lstat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", old, err)
	}
	if got := mustRead(t, filepath.Join(e.sessions(), "cli_local.jsonl")); !bytes.HasPrefix(got, want) {
		t.Errorf("the moved file does not start with the old bytes")
	}

	// Once ever: a real directory of regular files a command plants at
	// sessions/ afterwards is not imported at the next start, and the log
	// says so (it used to be moved into the sessions dir at every start).
	planted := `{"type":"message","role":"user","content":"planted"}` + "\n"
	writeTestFile(t, filepath.Join(old, "telegram_99.jsonl"), planted)
	e.script.Push(fakellm.Reply{Text: "still blue"})
	if _, stderr, err = e.run("agent", "-m", "and now?"); err != nil {
		t.Fatalf("agent after the plant: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "not imported") {
		t.Errorf("the planted sessions/ was not logged:\n%s", stderr)
	}
	if _, err := os.Lstat(filepath.Join(e.sessions(), "telegram_99.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the planted file was imported into the sessions dir: %v", err)
	}
	if got := mustRead(t, filepath.Join(old, "telegram_99.jsonl")); string(got) != planted {
		t.Errorf("the planted file was touched: %q", got)
	}
}

// `nanobot agent -m /new` prints how /new ended, not only its first note,
// and exits non-zero when it failed; the chat's model survives /new and the
// restart that every run of the command is.
func TestAgentNewSaysHowItEndedAndKeepsTheModel(t *testing.T) {
	e := newEnv(t)
	e.script.Push(fakellm.Reply{Text: "hi"})
	if _, stderr, err := e.run("agent", "-m", "hello"); err != nil {
		t.Fatalf("agent: %v\nstderr: %s", err, stderr)
	}
	if out, stderr, err := e.run("agent", "-m", "/model openai/gpt-4.1"); err != nil || !strings.Contains(out, "openai/gpt-4.1") {
		t.Fatalf("/model: %v\n%s\nstderr: %s", err, out, stderr)
	}

	// The model cannot save the conversation: /new keeps it and says so.
	e.script.Push(fakellm.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "no"})
	out, _, err := e.run("agent", "-m", "/new")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("a failed /new exited with %v, want status 1", err)
	}
	if !strings.Contains(out, "💾 Saving") || !strings.Contains(out, "⚠️ I could not save this conversation to memory") {
		t.Errorf("a failed /new printed %q; want the note and how it ended", out)
	}

	args, _ := json.Marshal(map[string]string{"history_entry": "[2026-12-01 10:00] Said hello.", "memory_update": "# Memory\n"})
	e.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "save", Name: "save_memory", Args: string(args)}}})
	out, stderr, err := e.run("agent", "-m", "/new")
	if err != nil {
		t.Fatalf("/new: %v\n%s\nstderr: %s", err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "Started a new conversation.") || !strings.Contains(last, "openai/gpt-4.1") {
		t.Errorf("/new printed %q; want how it ended, last", out)
	}

	e.script.Push(fakellm.Reply{Text: "still here"})
	if _, stderr, err := e.run("agent", "-m", "after the new start"); err != nil {
		t.Fatalf("agent: %v\nstderr: %s", err, stderr)
	}
	reqs := e.script.Requests()
	if m := reqs[len(reqs)-1].Model; m != "gpt-4.1" {
		t.Errorf("after /new and a restart the chat used model %q, want its chosen gpt-4.1", m)
	}
}
