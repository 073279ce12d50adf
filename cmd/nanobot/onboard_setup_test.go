package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// TestPromptSetup is onboard at a terminal: a wrong key is refused by the
// live test and asked again, the right one is saved 0600 beside the config,
// a malformed bot token is refused before any call, a good one is saved.
func TestPromptSetup(t *testing.T) {
	llm := openaifake.New(t, &fakellm.Script{})
	tg := telegramfake.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := "providers:\n  openai:\n    api_key: ${NB_TEST_ONBOARD_UNSET}\n    base_url: " + llm.URL() +
		"\nchannels:\n  telegram:\n    api_url: " + tg.URL() + "\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	answers := strings.Join([]string{
		"", "sk-wrong-0123456789", // default provider, a refused key
		"openai", openaifake.DefaultAPIKey, // asked again: the right one
		"telegram", "bad", // malformed
		"telegram", telegramfake.Token,
		"", // done
	}, "\n") + "\n"
	var out strings.Builder
	if err := promptSetup(context.Background(), strings.NewReader(answers), &out, path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not saved: openai refused this key", "openai accepted the key", "mode 0600",
		"not saved: that is not a Telegram bot token", "telegram accepted the token: @" + telegramfake.Username} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	secrets := filepath.Join(dir, config.SecretsFile)
	if fi, err := os.Stat(secrets); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v %v", fi, err)
	}
	cfg, err := daemon.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Providers["openai"].APIKey != openaifake.DefaultAPIKey || telegram.Of(cfg).Token != telegramfake.Token {
		t.Errorf("reloaded: key %q token %q", cfg.Providers["openai"].APIKey, telegram.Of(cfg).Token)
	}
	if strings.Contains(out.String(), openaifake.DefaultAPIKey) {
		t.Error("the key was echoed")
	}
}
