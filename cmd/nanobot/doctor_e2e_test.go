package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/anthropicfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// doctorEnv points both channels, and OpenAI with an Anthropic fallback,
// at fakes; extra entries (later ones win) break what a case breaks.
func doctorEnv(t *testing.T, e *env, extra ...string) []string {
	t.Helper()
	tg := telegramfake.New(t)
	dc := discordfake.New(t, discordfake.Options{Token: "MTIzNDU2Nzg5MDEyMzQ1Njc4.GdOcTr.discord-bot-token-abc123"})
	an := anthropicfake.New(t, nil)
	vars := []string{
		"NANOBOT_CHANNELS_TELEGRAM_ENABLED=true",
		"NANOBOT_CHANNELS_TELEGRAM_TOKEN=" + telegramfake.Token,
		"NANOBOT_CHANNELS_TELEGRAM_API_URL=" + tg.URL(),
		"NANOBOT_CHANNELS_TELEGRAM_ALLOW_FROM=7",
		"NANOBOT_CHANNELS_DISCORD_ENABLED=true",
		"NANOBOT_CHANNELS_DISCORD_TOKEN=" + dc.Token(),
		"NANOBOT_CHANNELS_DISCORD_API_URL=" + dc.URL(),
		"NANOBOT_CHANNELS_DISCORD_ALLOW_FROM=7",
		"NANOBOT_AGENTS_FALLBACKS=anthropic/claude-haiku-4-5",
		"NANOBOT_PROVIDERS_ANTHROPIC_API_KEY=" + anthropicfake.APIKey,
		"NANOBOT_PROVIDERS_ANTHROPIC_BASE_URL=" + an.URL(),
		// Port 0: free by construction. A port found free beforehand could
		// be taken by another process before doctor tries it.
		"NANOBOT_GATEWAY_LISTEN=127.0.0.1:0",
	}
	return append(vars, extra...)
}

// freeAddr is an address nothing listens on (the port was free a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// doctor runs `nanobot doctor` and returns its output and exit code.
func (e *env) doctor(vars []string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(binary, "doctor")
	cmd.Env = e.environ(vars...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		e.t.Fatal(err)
	}
	return string(out), 0
}

// verdicts maps "name" to "[status] detail" for each line of the report.
var reportLine = regexp.MustCompile(`^\[(ok|skip|warn|FAIL)\]\s+(\S+(?: \S+)?)\s{2,}(.*)$`)

func verdicts(out string) map[string]string {
	v := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := reportLine.FindStringSubmatch(l); m != nil {
			v[m[2]] = m[1] + " " + m[3]
		}
	}
	return v
}

func TestDoctorAllGood(t *testing.T) {
	e := newEnv(t)
	out, code := e.doctor(doctorEnv(t, e))
	if code != 0 {
		t.Fatalf("doctor exit %d on a good setup:\n%s", code, out)
	}
	v := verdicts(out)
	for name, want := range map[string]string{
		"config":             "ok ",
		"workspace":          "ok ",
		"sessions dir":       "ok ",
		"data dir":           "ok ",
		"gateway.listen":     "ok ",
		"provider openai":    "ok reachable, key accepted",
		"provider anthropic": "ok reachable, key accepted",
		"channel telegram":   "ok token accepted: @" + telegramfake.Username,
		"channel discord":    "ok token accepted: nanobot",
	} {
		if !strings.HasPrefix(v[name], want) {
			t.Errorf("%s: %q, want it to start with %q\n%s", name, v[name], want, out)
		}
	}
	if !strings.Contains(out, "Everything looks good.") {
		t.Errorf("no summary:\n%s", out)
	}
}

// TestDoctorWarnsAboutOldSessionsInTheWorkspace: a sessions/ still in the
// workspace (not moved yet, or what the move left) is a warning with the fix.
func TestDoctorWarnsAboutOldSessionsInTheWorkspace(t *testing.T) {
	e := newEnv(t)
	old := filepath.Join(e.workspace(), "sessions")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	out, _ := e.doctor(doctorEnv(t, e))
	v := verdicts(out)
	if !strings.HasPrefix(v["old sessions"], "warn "+old+" is still a directory in the workspace") ||
		!strings.Contains(out, "fix: start the gateway: it moves the session files to "+e.sessions()) {
		t.Errorf("old sessions: %q, want a warning with the fix\n%s", v["old sessions"], out)
	}
	if !strings.HasPrefix(v["sessions dir"], "ok "+e.sessions()) {
		t.Errorf("sessions dir: %q", v["sessions dir"])
	}
	// After the one-time move the gateway never imports one: doctor says so
	// rather than promise a move.
	if err := os.WriteFile(filepath.Join(e.home, ".nanobot", "sessions-moved.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = e.doctor(doctorEnv(t, e))
	if v := verdicts(out); !strings.HasPrefix(v["old sessions"], "warn "+old+" is a directory in the workspace after the one-time move") ||
		!strings.Contains(out, "fix: move real session files into "+e.sessions()+" by hand") {
		t.Errorf("old sessions after the move: %q\n%s", v["old sessions"], out)
	}
}

func TestDoctorReportsEachProblemWithAFix(t *testing.T) {
	e := newEnv(t)
	const badKey, badToken = "sk-wrong-key-0123456789", "999:wrong-telegram-token"
	vars := doctorEnv(t, e,
		"OPENAI_API_KEY="+badKey,
		"NANOBOT_CHANNELS_TELEGRAM_TOKEN="+badToken,
		"NANOBOT_CHANNELS_DISCORD_TOKEN=MTIz.nOtThE.not-the-discord-token",
		"NANOBOT_AGENTS_MODEL=openai/gpt-4o-mini-typo",
	)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	vars = append(vars, "NANOBOT_GATEWAY_LISTEN="+busy.Addr().String())
	notADir := filepath.Join(e.home, "workspace-file")
	if err := os.WriteFile(notADir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars = append(vars, "NANOBOT_AGENTS_WORKSPACE="+notADir)

	out, code := e.doctor(vars)
	if code != 1 {
		t.Fatalf("doctor exit %d with broken settings, want 1:\n%s", code, out)
	}
	v := verdicts(out)
	for name, want := range map[string]string{
		"provider openai":    "FAIL",
		"provider anthropic": "ok",
		"channel telegram":   "FAIL",
		"channel discord":    "FAIL",
		"gateway.listen":     "FAIL",
	} {
		if !strings.HasPrefix(v[name], want) {
			t.Errorf("%s: %q, want %s", name, v[name], want)
		}
	}
	for _, fix := range []string{
		"fix: the key was refused: put a valid key in providers.openai.api_key",
		"fix: get the token from @BotFather",
		"fix: reset the bot token in the Discord developer portal",
		"fix: stop the program using that port",
	} {
		if !strings.Contains(out, fix) {
			t.Errorf("the report lacks %q:\n%s", fix, out)
		}
	}
	if !strings.HasPrefix(v["workspace"], "FAIL "+notADir+" is not a directory") {
		t.Errorf("workspace: %q, want FAIL for a file where the workspace should be", v["workspace"])
	}
	for _, secret := range []string{badKey, badToken, "wrong-telegram-token", "not-the-discord-token"} {
		if strings.Contains(out, secret) {
			t.Errorf("the report shows the secret %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "problem(s) to fix") {
		t.Errorf("no summary:\n%s", out)
	}
}

func TestDoctorWarnsAboutAModelTheServerDoesNotList(t *testing.T) {
	e := newEnv(t)
	out, code := e.doctor(doctorEnv(t, e, "NANOBOT_AGENTS_MODEL=openai/gpt-4o-mini-typo"))
	if code != 0 {
		t.Fatalf("a warning alone should not fail doctor (exit %d):\n%s", code, out)
	}
	if !strings.Contains(out, `model "gpt-4o-mini-typo" is not in the list the server returned`) {
		t.Errorf("no warning about the unlisted model:\n%s", out)
	}
}

func TestDoctorInvalidConfig(t *testing.T) {
	e := &env{t: t, home: t.TempDir()}
	path := filepath.Join(e.home, ".nanobot", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("agents:\n  modle: openai/gpt-4o\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := e.doctor(nil)
	if code != 1 || !strings.HasPrefix(verdicts(out)["config"], "FAIL") || !strings.Contains(out, "agents.modle") {
		t.Errorf("exit %d, want 1 and the bad key named:\n%s", code, out)
	}

	missing := &env{t: t, home: t.TempDir()}
	out, code = missing.doctor(nil)
	if code != 1 || !strings.Contains(out, "fix: run `nanobot onboard`") {
		t.Errorf("missing config: exit %d:\n%s", code, out)
	}
}

// doctor starts each enabled MCP server and lists its tools: an HTTP server
// built with the official SDK passes, a stdio command that cannot start
// fails with a fix, a disabled one is skipped.
func TestDoctorStartsMCPServers(t *testing.T) {
	e := newEnv(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
	type query struct {
		Q string `json:"q"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "search", Description: "Search the notes."},
		func(context.Context, *sdk.CallToolRequest, query) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "nothing found"}}}, nil, nil
		})
	h := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer h.Close()
	missing := filepath.Join(e.home, "no-such-mcp-server")
	mcpYAML := fmt.Sprintf(`
tools:
  mcp_servers:
    notes: {url: %q}
    broken: {command: %q, args: ["--stdio"]}
    off: {command: %q, disabled: true}
`, h.URL, missing, missing)
	path := filepath.Join(e.home, ".nanobot", "config.yaml")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(mcpYAML); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	out, code := e.doctor(doctorEnv(t, e))
	if code != 1 {
		t.Fatalf("doctor exit %d with a broken MCP server, want 1:\n%s", code, out)
	}
	v := verdicts(out)
	for name, want := range map[string]string{
		"mcp notes":  "ok http: 1 tools: mcp_notes_search",
		"mcp broken": "FAIL stdio: ",
		"mcp off":    "skip disabled",
	} {
		if !strings.HasPrefix(v[name], want) {
			t.Errorf("%s: %q, want it to start with %q\n%s", name, v[name], want, out)
		}
	}
	if fix := "fix: run the command by hand to see why it fails (" + missing + " --stdio)"; !strings.Contains(out, fix) {
		t.Errorf("the report lacks %q:\n%s", fix, out)
	}
}

// A provider of kind openai-responses shows in status with its store
// setting, and doctor gives it the same cheap key check (GET
// /models with its key) and the same advice when the key is refused.
func TestDoctorChecksAResponsesProvider(t *testing.T) {
	e := newEnv(t)
	status := exec.Command(binary, "status")
	status.Env = e.environ("NANOBOT_PROVIDERS_OPENAI_KIND=openai-responses")
	if out, err := status.CombinedOutput(); err != nil || !strings.Contains(string(out), "openai-responses at ") || !strings.Contains(string(out), "store off") {
		t.Fatalf("status (%v) does not show the Responses provider with store off:\n%s", err, out)
	}
	out, code := e.doctor(doctorEnv(t, e, "NANOBOT_PROVIDERS_OPENAI_KIND=openai-responses"))
	if code != 0 || !strings.HasPrefix(verdicts(out)["provider openai"], "ok reachable, key accepted") {
		t.Fatalf("doctor exit %d, want provider openai ok:\n%s", code, out)
	}
	out, code = e.doctor(doctorEnv(t, e, "NANOBOT_PROVIDERS_OPENAI_KIND=openai-responses", "OPENAI_API_KEY=sk-wrong-key-0123456789"))
	if code != 1 || !strings.HasPrefix(verdicts(out)["provider openai"], "FAIL") ||
		!strings.Contains(out, "fix: the key was refused: put a valid key in providers.openai.api_key") {
		t.Errorf("doctor exit %d with a refused key, want FAIL with the fix:\n%s", code, out)
	}
}

// A gemini provider is checked by listing its models: a good key is
// accepted, a wrong one (which Gemini refuses with 400 API_KEY_INVALID) gets
// the key's fix, and the key never shows.
func TestDoctorChecksAGeminiKey(t *testing.T) {
	for _, tt := range []struct {
		key, want, fix string
	}{
		{geminifake.APIKey, "ok reachable, key accepted", ""},
		{"AIzaWrongGeminiKey-0123456789", "FAIL", "fix: the key was refused: put a valid key in providers.gemini.api_key"},
	} {
		e := newEnv(t)
		g := geminifake.New(t, nil)
		p := filepath.Join(e.home, ".nanobot", "config.yaml")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		entry := fmt.Sprintf("providers:\n  gemini: {api_key: \"${GEMINI_KEY_FOR_TEST}\", base_url: %q}\n", g.URL())
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), "providers:\n", entry, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := e.doctor(doctorEnv(t, e, "GEMINI_KEY_FOR_TEST="+tt.key, "NANOBOT_AGENTS_FALLBACKS=gemini/gemini-2.5-flash"))
		if v := verdicts(out)["provider gemini"]; !strings.HasPrefix(v, tt.want) || !strings.Contains(out, tt.fix) {
			t.Errorf("provider gemini: %q, want %q and %q\n%s", v, tt.want, tt.fix, out)
		}
		if strings.Contains(out, "AIzaWrong") {
			t.Errorf("the report shows the key:\n%s", out)
		}
	}
}
