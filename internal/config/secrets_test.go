package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const secretsYAML = `
providers:
  openai:
    api_key: sk-openai-0123456789
    extra_headers: {Authorization: "Bearer gw-token-abcdef", X-Title: nanobot-title}
  ollama:
    kind: openai
    api_key: ollama
    base_url: "http://user:base-pass-123@localhost:11434/v1?api_key=query-key-456&x=1"
channels:
  telegram:
    token: "123456:telegram-token-xyz"
    webhook_secret: webhook-secret-789
    proxy: "socks5://me:proxy-pass-000@127.0.0.1:1080"
  discord:
    token: discord-token-qwerty
  transcription:
    base_url: https://api.openai.com/v1
    api_key: transcribe-key-111
tools:
  web:
    brave_api_key: brave-key-222
  mcp_servers:
    gh:
      command: gh-mcp
      env: {GITHUB_TOKEN: ghp-token-333, LOG_LEVEL: debugging-verbose, AUTH_ENABLED: "true"}
    remote:
      url: https://mcp.example.com/mcp
      headers: {X-Api-Key: mcp-key-444, Accept-Language: en-GB-oxford}
api:
  keys: {webui: api-key-webui-555555}
bus:
  nats: {url: "nats://worker:nats-pass-666@n1:4222, nats://s3cr3t-nats-token-777@n2:4222"}
`

// secretValues are every secret in secretsYAML that is long enough to be one.
var secretValues = []string{
	"sk-openai-0123456789", "Bearer gw-token-abcdef", "base-pass-123", "query-key-456",
	"123456:telegram-token-xyz", "telegram-token-xyz", "webhook-secret-789", "proxy-pass-000", "discord-token-qwerty",
	"transcribe-key-111", "brave-key-222", "ghp-token-333", "mcp-key-444",
	"api-key-webui-555555", "nats-pass-666", "s3cr3t-nats-token-777",
}

// publicValues are values in secretsYAML under names that do not look secret.
var publicValues = []string{"nanobot-title", "debugging-verbose", "en-GB-oxford", "webui"}

func TestSecrets(t *testing.T) {
	isolateEnv(t)
	got := mustLoad(t, secretsYAML).Secrets()
	for _, s := range publicValues {
		if slices.Contains(got, s) {
			t.Errorf("Secrets() includes the public value %q", s)
		}
	}
	want := slices.Clone(secretValues)
	slices.Sort(want)
	sorted := slices.Sorted(slices.Values(got))
	if !reflect.DeepEqual(sorted, want) {
		t.Errorf("Secrets() =\n%q\nwant\n%q", sorted, want)
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("Secrets() not longest first: %q before %q", got[i-1], got[i])
		}
	}
}

func TestSecretsSkipsPlaceholdersAndDuplicates(t *testing.T) {
	c := &Config{Providers: map[string]ProviderConfig{
		"a": {APIKey: "none"},
		"b": {APIKey: "same-key-12345"},
		"c": {APIKey: "same-key-12345"},
	}}
	if got := c.Secrets(); !reflect.DeepEqual(got, []string{"same-key-12345"}) {
		t.Errorf("Secrets() = %q", got)
	}
}

func TestRedacted(t *testing.T) {
	isolateEnv(t)
	c := mustLoad(t, secretsYAML)
	before := fmt.Sprintf("%+v", *c)
	r := c.Redacted()
	out := fmt.Sprintf("%+v", r)
	for _, s := range secretValues {
		if strings.Contains(out, s) {
			t.Errorf("Redacted() still shows %q", s)
		}
	}
	for _, s := range publicValues {
		if !strings.Contains(out, s) {
			t.Errorf("Redacted() hid the public value %q", s)
		}
	}
	checks := map[string]string{
		"openai api_key":    r.Providers["openai"].APIKey,
		"ollama api_key":    r.Providers["ollama"].APIKey, // short, still masked for display
		"ollama base_url":   r.Providers["ollama"].BaseURL,
		"telegram proxy":    keyOf[string](t, &r, "channels.telegram.proxy"),
		"telegram token":    keyOf[string](t, &r, "channels.telegram.token"),
		"Authorization":     r.Providers["openai"].ExtraHeaders["Authorization"],
		"GITHUB_TOKEN":      r.Tools.MCPServers["gh"].Env["GITHUB_TOKEN"],
		"X-Api-Key":         r.Tools.MCPServers["remote"].Headers["X-Api-Key"],
		"discord token":     keyOf[string](t, &r, "channels.discord.token"),
		"brave key":         r.Tools.Web.BraveAPIKey,
		"transcription":     r.Channels.Transcription.APIKey,
		"webhook secret":    keyOf[string](t, &r, "channels.telegram.webhook_secret"),
		"empty stays empty": keyOf[string](t, &r, "channels.telegram.webhook_url"),
		"nats url":          r.Bus.NATS.URL,
	}
	want := map[string]string{
		"nats url":          "nats://worker:***@n1:4222,nats://***@n2:4222",
		"ollama base_url":   "http://user:***@localhost:11434/v1?api_key=***&x=1",
		"telegram proxy":    "socks5://me:***@127.0.0.1:1080",
		"empty stays empty": "",
	}
	for name, got := range checks {
		w, ok := want[name]
		if !ok {
			w = mask
		}
		if got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
	if after := fmt.Sprintf("%+v", *c); after != before {
		t.Error("Redacted changed the original config")
	}
}

func TestLooksSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "X-Api-Key": true, "GITHUB_TOKEN": true, "DB_PASSWORD": true,
		"Cookie": true, "CLIENT_SECRET": true, "X-Title": false, "LOG_LEVEL": false, "HTTP-Referer": false,
	} {
		if got := looksSecret(name); got != want {
			t.Errorf("looksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}
