package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/logging"
)

const natsCreds = `-----BEGIN NATS USER JWT-----
eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJURVNUIn0.c2lnbmF0dXJlLXRlc3Q
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.
NKEYs are sensitive and should be treated as secrets.

-----BEGIN USER NKEY SEED-----
SUAGMJH5XLGZKQQWAWKRZJIGMOU4HPFUYLXJMXOO5NLFEO2OJQEO7NVMA
------END USER NKEY SEED------

*************************************************************
`

// TestEverySecretIsRedacted: each secret the daemon holds is removed from
// tool output (the registry's redactor) and from the log, whether it comes
// from the config or from a file next to it (issue 30).
func TestEverySecretIsRedacted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(WebTokenFile, "webfile-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2\n")
	cfg := &config.Config{}
	cfg.Providers = map[string]config.ProviderConfig{"openai": {APIKey: "sk-provider-key-123456"}}
	telegram.Of(cfg).Token = "123456789:AAtelegram-secret-part"
	telegram.Of(cfg).WebhookSecret = "whsec-webhook-987654"
	discord.Of(cfg).Token = "discord-bot-token-abcdef"
	cfg.API.Keys = map[string]string{"bob": "api-key-of-bob-424242"}
	cfg.Bus.NATS.URL = "nats://natstoken-1q2w3e4r@nats1:4222,nats://user:natspass-5t6y7u8i@nats2:4222"
	cfg.Bus.NATS.CredsFile = write("user.creds", natsCreds)
	cfg.Bus.NATS.TLS.KeyFile = write("client.key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n")

	secrets := map[string]string{
		"provider key":         "sk-provider-key-123456",
		"telegram token":       "123456789:AAtelegram-secret-part",
		"telegram secret part": "AAtelegram-secret-part",
		"webhook secret":       "whsec-webhook-987654",
		"discord token":        "discord-bot-token-abcdef",
		"api.keys":             "api-key-of-bob-424242",
		"nats token":           "natstoken-1q2w3e4r",
		"nats password":        "natspass-5t6y7u8i",
		"web token file":       "webfile-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2",
		"nats creds jwt":       "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJURVNUIn0.c2lnbmF0dXJlLXRlc3Q",
		"nats creds seed":      "SUAGMJH5XLGZKQQWAWKRZJIGMOU4HPFUYLXJMXOO5NLFEO2OJQEO7NVMA",
		"nats tls key":         "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
	}
	redact := logging.NewSecrets(cfg.Secrets(), SecretFiles(cfg, dir)).Redact
	var logged bytes.Buffer
	log, err := logging.New(logging.Options{Format: "json", Secrets: cfg.Secrets(), SecretFiles: SecretFiles(cfg, dir), Out: &logged})
	if err != nil {
		t.Fatal(err)
	}
	all := Secrets(cfg, dir)
	for name, s := range secrets {
		t.Run(name, func(t *testing.T) {
			if !slices.Contains(all, s) {
				t.Errorf("Secrets() lacks the %s", name)
			}
			if out := redact("tool output: " + s + " end"); strings.Contains(out, s) {
				t.Errorf("tool output keeps the %s: %q", name, out)
			}
			logged.Reset()
			log.Info("line with " + s)
			if strings.Contains(logged.String(), s) || !strings.Contains(logged.String(), "[REDACTED]") {
				t.Errorf("log keeps the %s: %q", name, logged.String())
			}
		})
	}
	// The prose of the credentials file is not a secret.
	if out := redact("NKEYs are sensitive and should be treated as secrets."); strings.Contains(out, "[REDACTED]") {
		t.Errorf("ordinary words redacted: %q", out)
	}
}

// TestRotatedWebTokenIsRedacted: `nanobot web token --rotate` while the
// daemon runs changes the file; the new token is redacted from then on.
func TestRotatedWebTokenIsRedacted(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{}
	s := logging.NewSecrets(cfg.Secrets(), SecretFiles(cfg, dir))
	const token = "rotated-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jj1"
	if got := s.Redact(token); got != token {
		t.Fatalf("redacted before the file exists: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, WebTokenFile), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := s.Redact("token " + token); strings.Contains(got, token) {
		t.Errorf("the new token is not redacted: %q", got)
	}
}

// TestProtectedPaths: the data dir's files are protected around the
// workspace inside it, and the whole data dir when the workspace is
// elsewhere.
func TestProtectedPaths(t *testing.T) {
	data := t.TempDir()
	for _, n := range []string{"config.yaml", "other-state.json", "workspace"} {
		if err := os.MkdirAll(filepath.Join(data, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{}
	cfg.Agents.Workspace = filepath.Join(data, "workspace")
	got := protectedPaths(cfg, data)
	for _, want := range []string{"config.yaml", "other-state.json", WebTokenFile, PairingFile, "sessions"} {
		if !slices.Contains(got, filepath.Join(data, want)) {
			t.Errorf("%s not protected: %v", want, got)
		}
	}
	if slices.Contains(got, data) || slices.Contains(got, cfg.Agents.Workspace) {
		t.Errorf("the workspace would be protected: %v", got)
	}
	cfg.Agents.Workspace = t.TempDir()
	if got := protectedPaths(cfg, data); !slices.Contains(got, data) {
		t.Errorf("data dir away from the workspace not protected whole: %v", got)
	}
	// agents.sessions_dir may be anywhere: it is protected where it is.
	cfg.Agents.SessionsDir = filepath.Join(t.TempDir(), "chats")
	if got := protectedPaths(cfg, data); !slices.Contains(got, cfg.Agents.SessionsDir) {
		t.Errorf("a sessions dir outside the data dir not protected: %v", got)
	}
}
