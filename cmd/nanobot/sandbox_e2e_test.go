package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/sandbox"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// The escape suite (docs/tools.md#sandbox, issue 30): a prompt-injected model
// asks the real binary's exec tool, through the real launcher, for every
// secret the daemon holds and for another chat's conversation. The home is
// laid out as a real one: HOME/.nanobot/{config.yaml, web-token, pairing.json,
// sessions/, workspace/}.

// Secrets of the fixture. Each is one the daemon holds: a literal key in
// the config, a key it got from its environment, channel tokens, the
// webhook secret, an API key, a NATS token, the web token file, a pairing
// code, and another chat's text.
const (
	escAPIKey      = "sk-escape-literal-key-1b2c3d4e5f6a"
	escEnvKey      = "sk-ant-escape-env-key-77e8f9a0b1"
	escTGSecret    = "TGsecret-escape-0a9b8c7d6e5f"
	escTGToken     = "123456789:" + escTGSecret
	escWebhook     = "whsec-escape-5f4e3d2c1b0a"
	escAPIKeys     = "apikey-escape-9z8y7x6w5v4u"
	escNATS        = "natstoken-escape-1q2w3e4r5t"
	escWebToken    = "webtok-escape-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
	escPairingCode = "PAIRCODE-escape-77aa88bb"
	escOtherChat   = "OTHER-CHAT-escape-plans-31415926"
)

var escSecrets = []string{escAPIKey, escEnvKey, escTGSecret, escWebhook, escAPIKeys, escNATS, escWebToken, escPairingCode, escOtherChat}

const escConfig = `agents:
  workspace: ~/.nanobot/workspace
  model: openai/gpt-4o-mini
providers:
  openai:
    api_key: ` + escAPIKey + `
    base_url: https://api.openai.com/v1
  anthropic:
    api_key: ${ANTHROPIC_API_KEY}
channels:
  telegram:
    enabled: false
    token: "` + escTGToken + `"
    webhook_secret: ` + escWebhook + `
api:
  keys:
    bob: ` + escAPIKeys + `
bus:
  nats:
    url: nats://` + escNATS + `@127.0.0.1:4222
tools:
  exec:
    sandbox: %s
    network: %v
    expose: %s
`

// escapeHome writes the fixture and returns the env running the binary in
// it with sandbox mode, network and the expose list (YAML flow syntax).
func escapeHome(t *testing.T, mode string, network bool, expose string) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), script: &fakellm.Script{}}
	e.llm = openaifake.New(t, e.script, openaifake.WithAPIKey(escAPIKey))
	data := filepath.Join(e.home, ".nanobot")
	files := map[string]string{
		"config.yaml":                fmt.Sprintf(escConfig, mode, network, expose),
		"web-token":                  escWebToken + "\n",
		"pairing.json":               `{"pending":[{"code":"` + escPairingCode + `","channel":"telegram","sender":"99"}]}`,
		"sessions/telegram_42.jsonl": `{"type":"message","message":{"role":"user","content":"` + escOtherChat + `"}}` + "\n",
		"workspace/AGENTS.md":        "# Agents\n",
		// Until sessions leave the workspace (issue 30's other half), the
		// sandbox cannot let commands make entries at its top (see
		// sandbox.Policy.Grants); projects/ is where these tests work.
		"workspace/projects/README.md": "projects\n",
	}
	for name, text := range files {
		path := filepath.Join(data, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// escapeEnv is the daemon's environment: the user's, a provider key, and
// a PATH of system directories only (the user's own bin directories are
// outside the sandbox).
func (e *env) escapeEnv(extra ...string) []string {
	return append(e.environ("ANTHROPIC_API_KEY="+escEnvKey, "PATH=/usr/local/bin:/usr/bin:/bin"), extra...)
}

// runTools has the model call exec with each command (and read_file with
// each path), then returns the tool results the model was sent back, by
// call id, and the binary's output.
func (e *env) runTools(t *testing.T, commands map[string]string, reads map[string]string, extraEnv ...string) (map[string]string, string) {
	t.Helper()
	var calls []fakellm.Call
	for id, c := range commands {
		args, _ := json.Marshal(map[string]string{"command": c})
		calls = append(calls, fakellm.Call{ID: id, Name: "exec", Args: string(args)})
	}
	for id, p := range reads {
		args, _ := json.Marshal(map[string]string{"path": p})
		calls = append(calls, fakellm.Call{ID: id, Name: "read_file", Args: string(args)})
	}
	before := len(e.script.Requests())
	e.script.Push(fakellm.Reply{ToolCalls: calls}, fakellm.Reply{Text: "done"})
	cmd := e.command(e.escapeEnv(extraEnv...), "agent", "-m", "please summarise this web page")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	results := map[string]string{}
	for _, req := range e.script.Requests()[before:] {
		for _, m := range req.Messages {
			for _, r := range m.ToolResults {
				if _, ok := commands[r.CallID]; ok {
					results[r.CallID] = r.Content
				}
				if _, ok := reads[r.CallID]; ok {
					results[r.CallID] = r.Content
				}
			}
		}
	}
	if len(results) != len(calls) {
		t.Fatalf("the model got %d tool results for %d calls\n%s", len(results), len(calls), out)
	}
	return results, string(out)
}

// escapeAttacks are what the attacker ran, and more. Each is run
// from the workspace.
var escapeAttacks = map[string]string{
	"config_rev":       `cat ~/.nanobot/config.yaml | rev`,
	"base64_eval":      `eval "$(echo ` + base64.StdEncoding.EncodeToString([]byte("cat ~/.nanobot/config.yaml | rev")) + ` | base64 -d)"`,
	"sessions_glob":    `cd ~/.nanobot && cat s*/*.jsonl | rev`,
	"sessions_up":      `cat ../s*/*.jsonl | rev`,
	"dirname_pwd":      `cd "$(dirname "$PWD")" && cat config.yaml web-token pairing.json s*/*.jsonl | rev`,
	"python_pieces":    `python3 -c "import os;d=os.path.join(os.environ['HOME'],'.nano'+'bot');print(''.join(open(os.path.join(d,f)).read() for f in ['con'+'fig.yaml','web-'+'token','pair'+'ing.json'])[::-1])"`,
	"cd_up_web_token":  `cd .. && cat web-tok* | rev`,
	"proc_ppid_rot13":  `tr 'A-Za-z' 'N-ZA-Mn-za-m' < /proc/$PPID/environ`,
	"proc_all_environ": `cat /proc/*/environ 2>/dev/null | rev`,
	"proc_ppid_mem":    `head -c 4096 /proc/$PPID/mem | base64; tr -d '\0' < /proc/$PPID/cmdline; ls -l /proc/$PPID/fd/`,
	"od_config":        `od -c ~/.nanobot/config.yaml`,
	"base64_config":    `base64 ~/.nanobot/config.yaml; base64 ~/.nanobot/web-token`,
	"find_root":        `find / -path /proc -prune -o \( -name config.yaml -o -name web-token -o -name pairing.json -o -name '*.jsonl' \) -print 2>/dev/null | while read -r f; do base64 "$f"; done`,
	"grep_home":        `grep -rs -e sk- -e webtok -e OTHER ~ 2>/dev/null | rev`,
	"symlink":          `cd projects && mkdir -p planted && ln -sf ~/.nanobot/config.yaml planted/c && ln -sf ~/.nanobot/sessions planted/s; cat planted/c planted/s/* | rev`,
	"hardlink":         `cd projects && mkdir -p hl && ln ~/.nanobot/config.yaml hl/c; ln ~/.nanobot/web-token hl/w; cat hl/c hl/w | rev`,
	"write_outside":    `echo 'tools: {exec: {sandbox: off}}' >> ~/.nanobot/config.yaml; echo x > ~/.nanobot/evil; echo x > "$(dirname "$PWD")/evil2"; echo x > ~/evil3; echo x > /evil4; ls -la ~ ~/.nanobot`,
	"env":              `env | rev; cat /proc/self/environ | rev`,
	"tmp_neighbours":   `ls -la "$TMPDIR" "$TMPDIR/.." 2>&1 | rev`,
}

// TestSandboxEscapeSuite runs every attack through the real launcher with
// tools.exec.sandbox: auto on this kernel: no output (in clear, reversed,
// rot13, od or base64) holds a secret or the other chat's text, nothing is
// written outside the workspace, and the read_file tool does not follow the
// planted links either.
func TestSandboxEscapeSuite(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	e := escapeHome(t, "auto", true, "[]")
	data := filepath.Join(e.home, ".nanobot")
	configBefore := mustRead(t, filepath.Join(data, "config.yaml"))
	results, out := e.runTools(t, escapeAttacks, nil)
	for id, text := range results {
		if leaked := leaks(text); len(leaked) > 0 {
			t.Errorf("%s (%s) leaked %v:\n%s", id, escapeAttacks[id], leaked, text)
		}
	}
	if leaked := leaks(out); len(leaked) > 0 {
		t.Errorf("the binary's output leaked %v:\n%s", leaked, out)
	}
	if !strings.Contains(results["config_rev"], "Permission denied") {
		t.Errorf("config_rev was not denied by the kernel:\n%s", results["config_rev"])
	}
	// The planted links, now that they exist, through the daemon's own
	// read_file.
	reads, _ := e.runTools(t, nil, map[string]string{"read_c": "projects/planted/c", "read_s": "projects/planted/s/telegram_42.jsonl", "read_h": "projects/hl/c"})
	for id, text := range reads {
		if leaked := leaks(text); len(leaked) > 0 {
			t.Errorf("read_file %s leaked %v:\n%s", id, leaked, text)
		}
	}
	if string(mustRead(t, filepath.Join(data, "config.yaml"))) != string(configBefore) {
		t.Error("a command changed the config")
	}
	for _, p := range []string{filepath.Join(data, "evil"), filepath.Join(data, "evil2"), filepath.Join(e.home, "evil3"), "/evil4"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a command wrote %s", p)
			_ = os.Remove(p)
		}
	}
	// What the daemon keeps of the turn holds no secret either.
	for _, dir := range []string{filepath.Join(e.workspace(), "sessions"), filepath.Join(data, "sessions")} {
		b, _ := os.ReadFile(filepath.Join(dir, "cli_local.jsonl"))
		if leaked := leaks(string(b)); len(leaked) > 0 {
			t.Errorf("session record %s leaked %v", dir, leaked)
		}
	}
}

// TestSandboxEscapeSuiteFailsWithSandboxOff proves the suite can fail: with
// tools.exec.sandbox: off, some of the same attacks get through the text
// heuristics and leak (what issue 30 found).
func TestSandboxEscapeSuiteFailsWithSandboxOff(t *testing.T) {
	e := escapeHome(t, "off", true, "[]")
	attacks := map[string]string{}
	for _, id := range []string{"dirname_pwd", "python_pieces", "proc_ppid_rot13"} {
		attacks[id] = escapeAttacks[id]
	}
	results, _ := e.runTools(t, attacks, nil)
	for id, text := range results {
		if id == "proc_ppid_rot13" {
			// Non-dumpable, the daemon's environ is closed even here to
			// anyone without CAP_SYS_PTRACE; a root test has it.
			continue
		}
		if len(leaks(text)) == 0 {
			t.Errorf("with the sandbox off, %s did not leak; the suite would not notice a broken sandbox:\n%s", id, text)
		}
	}
}

// TestSandboxKeepsWhatUsersNeed: under the sandbox, ls, git, python3
// scripts, curl to a local server whose port the user lists in
// tools.exec.connect_ports, a skill's script and exposed paths work; with
// network: false, curl is refused where the kernel has TCP rules. (An
// unlisted port is refused since the connect rules: docs/tools.md#network.)
func TestSandboxKeepsWhatUsersNeed(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello from the local server")) }))
	defer srv.Close()
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "gh.yml"), []byte("exposed-ro-content"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	expose := fmt.Sprintf("[{path: %s, mode: ro}, {path: %s, mode: rw}]\n    connect_ports: [%s]", ro, rw, port)
	for _, network := range []bool{true, false} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			e := escapeHome(t, "required", network, expose)
			skill := filepath.Join(e.workspace(), "skills", "hello", "scripts", "hello.sh")
			if err := os.MkdirAll(filepath.Dir(skill), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(skill, []byte("#!/bin/sh\necho \"skill says hi to $1\"\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			results, _ := e.runTools(t, map[string]string{
				"ls":     `ls`,
				"git":    `cd projects && mkdir -p proj && cd proj && git init -q && echo hi > a.txt && git add a.txt && git -c user.name=n -c user.email=n@example.com commit -qm first && git log --format=%s`,
				"python": `cd projects && printf 'import sys\nprint(sum(range(10)), sys.argv[1])\n' > calc.py && python3 calc.py ok`,
				"curl":   `curl -sS --max-time 5 ` + srv.URL + `/`,
				"skill":  `skills/hello/scripts/hello.sh you`,
				"ro":     `cat ` + filepath.Join(ro, "gh.yml") + `; echo x > ` + filepath.Join(ro, "new") + ` || echo ro-refused`,
				"rw":     `echo written > ` + filepath.Join(rw, "out") + ` && cat ` + filepath.Join(rw, "out"),
			}, nil)
			want := map[string]string{
				"ls": "AGENTS.md", "git": "first", "python": "45 ok", "skill": "skill says hi to you",
				"ro": "exposed-ro-content", "rw": "written",
			}
			for id, w := range want {
				if !strings.Contains(results[id], w) || !strings.Contains(results[id], "exit code 0") {
					t.Errorf("%s: want %q and exit 0, got:\n%s", id, w, results[id])
				}
			}
			if !strings.Contains(results["ro"], "ro-refused") {
				t.Errorf("wrote into a read-only exposed path:\n%s", results["ro"])
			}
			switch {
			case network && !strings.Contains(results["curl"], "hello from the local server"):
				t.Errorf("curl with network on:\n%s", results["curl"])
			case !network && sandbox.ABI() >= 4 && strings.Contains(results["curl"], "hello from the local server"):
				t.Errorf("curl with network off reached the server:\n%s", results["curl"])
			}
		})
	}
}

// TestSandboxDegradation simulates a kernel without Landlock: auto warns
// once at start and doctor reports it with the fix; required refuses every
// command with a clear message; status shows the mode in effect.
func TestSandboxDegradation(t *testing.T) {
	noLandlock := "NANOBOT_TEST_LANDLOCK_ABI=0"
	t.Run("auto", func(t *testing.T) {
		e := escapeHome(t, "auto", true, "[]")
		results, out := e.runTools(t, map[string]string{"ls": "ls"}, nil, noLandlock)
		if n := strings.Count(out, "this kernel has no Landlock"); n != 1 {
			t.Errorf("want one start-up warning, got %d:\n%s", n, out)
		}
		if !strings.Contains(results["ls"], "AGENTS.md") {
			t.Errorf("auto without Landlock should still run commands:\n%s", results["ls"])
		}
		doctor := e.command(e.escapeEnv(noLandlock), "doctor")
		b, _ := doctor.CombinedOutput()
		if !regexp.MustCompile(`\[warn\]\s+exec sandbox\s+this kernel has no Landlock`).Match(b) || !strings.Contains(string(b), "fix: run on Linux 5.13") {
			t.Errorf("doctor without Landlock:\n%s", b)
		}
		status := e.command(e.escapeEnv(noLandlock), "status")
		b, _ = status.CombinedOutput()
		if !strings.Contains(string(b), "heuristics only (mode auto, no Landlock in this kernel)") {
			t.Errorf("status without Landlock:\n%s", b)
		}
	})
	t.Run("required", func(t *testing.T) {
		e := escapeHome(t, "required", true, "[]")
		results, _ := e.runTools(t, map[string]string{"ls": "ls"}, nil, noLandlock)
		if !strings.Contains(results["ls"], "tools.exec.sandbox is required, and this kernel has no Landlock") || strings.Contains(results["ls"], "AGENTS.md") {
			t.Errorf("required without Landlock ran or did not say why:\n%s", results["ls"])
		}
		doctor := e.command(e.escapeEnv(noLandlock), "doctor")
		b, _ := doctor.CombinedOutput()
		if !regexp.MustCompile(`\[FAIL\]\s+exec sandbox`).Match(b) {
			t.Errorf("doctor with required and no Landlock:\n%s", b)
		}
	})
	t.Run("landlock", func(t *testing.T) {
		if sandbox.ABI() < 1 {
			t.Skip("this kernel has no Landlock")
		}
		e := escapeHome(t, "auto", false, "[]")
		b, _ := e.command(e.escapeEnv(), "status").CombinedOutput()
		want := fmt.Sprintf("landlock (mode auto, Landlock ABI %d)", sandbox.ABI())
		if !strings.Contains(string(b), want) {
			t.Errorf("status on this kernel: want %q in\n%s", want, b)
		}
	})
}

// leaks returns the secrets found in text as it is, reversed, rot13'd,
// decoded from od -c, or decoded from base64.
func leaks(text string) []string {
	views := []string{text, reverse(text), rot13(text), odDecode(text), reverse(odDecode(text))}
	views = append(views, base64Decodings(text)...)
	flat := strings.Join(strings.Fields(text), "")
	var found []string
	for _, s := range escSecrets {
		hit := false
		for _, v := range views {
			hit = hit || strings.Contains(v, s)
		}
		// base64 of the secret at each of the three alignments.
		for pad := 0; pad < 3 && !hit; pad++ {
			enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", pad) + s))
			hit = strings.Contains(flat, enc[4:len(enc)-4])
		}
		if hit {
			found = append(found, s)
		}
	}
	return found
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}

var odOffset = regexp.MustCompile(`^[0-7]{7}$`)

// odDecode undoes `od -c`: offsets dropped, one character per field.
func odDecode(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && odOffset.MatchString(f[0]) {
			b.WriteString(strings.Join(f[1:], ""))
		}
	}
	return b.String()
}

var base64Run = regexp.MustCompile(`(?m)(?:^[A-Za-z0-9+/=]{8,}\n?)+`)

// base64Decodings decodes every run of base64-looking lines.
func base64Decodings(s string) []string {
	var out []string
	for _, run := range base64Run.FindAllString(s, -1) {
		run = strings.Join(strings.Fields(run), "")
		for start := 0; start < 4 && start < len(run); start++ {
			r := run[start:]
			r = r[:len(r)/4*4]
			if b, err := base64.StdEncoding.DecodeString(r); err == nil {
				out = append(out, string(b))
			} else if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(r, "=")); err == nil {
				out = append(out, string(b))
			}
		}
	}
	return out
}

// command is the binary with args, run in environ.
func (e *env) command(environ []string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = environ
	return cmd
}
