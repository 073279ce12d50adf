package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// The daemon's tokens and keys never reach the chat, the model or the
// session files, even when a provider echoes one in an error or a file in
// the workspace holds one. (The logs are checked with the real binary in
// cmd/nanobot/secrets_test.go.)
func TestSecretsNeverReachChatModelOrSession(t *testing.T) {
	g := startWith(t, setup{})
	secrets := []string{openaifake.DefaultAPIKey, telegramfake.Token}
	env := "TELEGRAM_BOT_TOKEN=" + telegramfake.Token + "\nOPENAI_API_KEY=" + openaifake.DefaultAPIKey + "\n"
	if err := os.WriteFile(filepath.Join(g.cfg.Agents.Workspace, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}

	// A provider (or a proxy in front of it) that echoes credentials in its
	// error message: its own key, which the adapter scrubs, and another of
	// the daemon's secrets, which only the agent's redaction catches.
	g.script.Push(fakellm.Reply{Status: 400, ErrorType: "invalid_request_error",
		ErrorMessage: "malformed headers: Authorization: Bearer " + openaifake.DefaultAPIKey + ", X-Upstream: " + telegramfake.Token})
	g.tg.PushMessage(telegramfake.DM(owner, "hello"))
	g.waitPrefix(owner, "⚠️ The model provider rejected the request")

	// A tool that reads a file holding both secrets.
	g.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c1", Name: "read_file", Args: `{"path":".env"}`}}},
		fakellm.Reply{Text: "I read it."},
	)
	g.tg.PushMessage(telegramfake.DM(owner, "what is in .env?"))
	g.waitLast(owner, "I read it.")

	g.tg.PushMessage(telegramfake.DM(owner, "/status"))
	g.tg.Wait(t, "/status answer", func() bool { return len(g.tg.Visible(owner)) == 3 })
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}

	visible := strings.Join(g.tg.Visible(owner), "\n")
	if !strings.Contains(strings.ToLower(visible), "x-upstream: [redacted]") {
		t.Errorf("the echoed key was not replaced in the error: %q", visible)
	}
	var sent []string
	for _, r := range g.script.Requests() {
		sent = append(sent, string(r.Raw))
	}
	sessions, _ := filepath.Glob(filepath.Join(g.cfg.Agents.SessionsDir, "*"))
	var stored []string
	for _, f := range sessions {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, string(b))
	}
	for _, secret := range secrets {
		for where, text := range map[string]string{
			"the chat":             visible,
			"the model's requests": strings.Join(sent, "\n"),
			"the session files":    strings.Join(stored, "\n"),
		} {
			if strings.Contains(text, secret) {
				t.Errorf("secret %q reached %s", secret[:8]+"…", where)
			}
		}
	}
}
