package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// secrets are the credentials the test daemons run with.
var secrets = map[string]string{"OpenAI key": openaifake.DefaultAPIKey, "Telegram token": telegramfake.Token}

func assertNoSecret(t *testing.T, where, text string) {
	t.Helper()
	for name, s := range secrets {
		if strings.Contains(text, s) {
			i := strings.Index(text, s)
			t.Errorf("the %s appears in %s: …%s…", name, where, text[max(0, i-80):i])
		}
	}
}

// At debug level, through connection failures whose errors name the Bot
// API URL (which holds the token), provider errors that echo credentials,
// tool output that contains them and /status, the real binary's log, the
// chat, the session files and `nanobot status` never show a token or key.
func TestSecretsNeverInLogsChatSessionsOrStatus(t *testing.T) {
	// Every Bot API call fails at a proxy that refuses connections: the
	// transport errors carry the request URL, token included.
	broken := newGatewayEnv(t, "proxy: http://127.0.0.1:1")
	broken.launch()
	broken.waitUntil("a logged connection failure", func() bool {
		return strings.Count(broken.stderr.String(), "telegram unreachable") >= 1
	})
	broken.stop()
	assertNoSecret(t, "the log of a gateway that cannot reach Telegram", broken.stderr.String())

	e := newGatewayEnv(t, "")
	env := "TELEGRAM_BOT_TOKEN=" + telegramfake.Token + "\nOPENAI_API_KEY=" + openaifake.DefaultAPIKey + "\n"
	ws := filepath.Join(e.home, ".nanobot", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	e.script.Push(
		fakellm.Reply{Status: 400, ErrorType: "invalid_request_error",
			ErrorMessage: "bad headers: Authorization: Bearer " + openaifake.DefaultAPIKey + ", X-Upstream: " + telegramfake.Token},
		fakellm.Reply{ToolCalls: []fakellm.Call{
			{ID: "c1", Name: "read_file", Args: `{"path":".env"}`},
			{ID: "c2", Name: "exec", Args: `{"command":"env; cat .env"}`},
		}},
		fakellm.Reply{Text: "Done reading."},
	)
	e.start()
	e.say(alice, "hello")
	e.tg.Wait(t, "the error", func() bool { return len(e.tg.Visible(alice)) == 1 })
	e.say(alice, "show me .env")
	e.tg.Wait(t, "the answer", func() bool { return len(e.tg.Visible(alice)) == 2 })
	e.say(alice, "/status")
	e.tg.Wait(t, "/status", func() bool { return len(e.tg.Visible(alice)) == 3 })
	e.stop()

	if !strings.Contains(e.stderr.String(), `"level":"debug"`) {
		t.Errorf("the gateway did not log at debug level:\n%s", e.stderr)
	}
	assertNoSecret(t, "the debug log", e.stderr.String())
	assertNoSecret(t, "the chat", strings.Join(e.tg.Visible(alice), "\n"))
	var requests []string
	for _, r := range e.script.Requests() {
		requests = append(requests, string(r.Raw))
	}
	assertNoSecret(t, "the model's requests", strings.Join(requests, "\n"))
	files, _ := filepath.Glob(filepath.Join(e.home, ".nanobot", "sessions", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, f, string(b))
	}
	status := exec.Command(binary, "--config", e.config, "status")
	status.Env = e.env()
	out, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	assertNoSecret(t, "nanobot status", string(out))
}

// A config other users can read holds secrets in the open: every command
// warns about it.
func TestWorldReadableConfigWarns(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.home, ".nanobot", "config.yaml")
	_, stderr, err := e.run("status")
	if err != nil || strings.Contains(stderr, "readable by other users") {
		t.Fatalf("a 0600 config should not warn: %v\n%s", err, stderr)
	}
	if err := os.Chmod(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = e.run("status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "readable by other users") || !strings.Contains(stderr, "chmod 600") {
		t.Errorf("no warning for a world-readable config:\n%s", stderr)
	}
}
