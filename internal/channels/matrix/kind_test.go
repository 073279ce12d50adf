package matrix_test

import (
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/matrix"
	"github.com/nanobot-go/nanobot/internal/config"
)

func TestSessionKeyAndTargetArePairs(t *testing.T) {
	for _, c := range []channels.Chat{
		{ID: "!abc:example.org"},
		{ID: "!abc:thread.example.org"}, // a server name holding the marker's word
		{ID: "!abc:example.org", Metadata: map[string]string{matrix.MetaThreadID: "$old:example.org"}}, // room v1/v2 event id
		{ID: "!abc:example.org:8448"}, // a port in the server name
		{ID: "!abc:example.org", Metadata: map[string]string{matrix.MetaThreadID: "$root-event_1"}},
		{ID: "!abc:thread", Metadata: map[string]string{matrix.MetaThreadID: "$x"}},
	} {
		key := matrix.SessionKey(c)
		got, ok := matrix.Target(key)
		if !ok || got.ID != c.ID || got.Metadata[matrix.MetaThreadID] != c.Metadata[matrix.MetaThreadID] {
			t.Errorf("Target(SessionKey(%+v) = %q) = %+v, %v", c, key, got, ok)
		}
	}
	for _, key := range []string{"matrix:", "discord:123", "telegram:!a:b", "matrix:!abc:x:thread:", "matrix::thread:$x", "matrix:!a b:c"} {
		if c, ok := matrix.Target(key); ok {
			t.Errorf("Target(%q) = %+v, want no chat", key, c)
		}
	}
}

func TestSectionValidation(t *testing.T) {
	ok := func(c *matrix.Config) {
		c.Enabled, c.Homeserver, c.UserID, c.AccessToken = true, "https://matrix.example.org", "@bot:example.org", "syt_x"
		c.AllowFrom = []string{"@ann:example.org"}
	}
	for _, tc := range []struct {
		name string
		edit func(*matrix.Config)
		key  string // the key the problem names; "" for none
	}{
		{"defaults, disabled", func(*matrix.Config) {}, ""},
		{"enabled and complete", ok, ""},
		{"password instead of a token", func(c *matrix.Config) { ok(c); c.AccessToken, c.Password = "", "pw" }, ""},
		{"no credential", func(c *matrix.Config) { ok(c); c.AccessToken = "" }, "channels.matrix.access_token"},
		{"no homeserver", func(c *matrix.Config) { ok(c); c.Homeserver = "" }, "channels.matrix.homeserver"},
		{"homeserver not a URL", func(c *matrix.Config) { ok(c); c.Homeserver = "matrix.example.org" }, "channels.matrix.homeserver"},
		{"user id without server", func(c *matrix.Config) { ok(c); c.UserID = "@bot" }, "channels.matrix.user_id"},
		{"empty allowlist", func(c *matrix.Config) { ok(c); c.AllowFrom = nil }, "channels.matrix.allow_from"},
		{"bad group policy", func(c *matrix.Config) { ok(c); c.GroupPolicy = "all" }, "channels.matrix.group_policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := matrix.Defaults()
			tc.edit(&c)
			var p config.Problems
			matrix.Section.Validate(&c, false, &p)
			switch {
			case tc.key == "" && len(p) > 0:
				t.Errorf("problems %v, want none", p)
			case tc.key != "" && (len(p) == 0 || !strings.HasPrefix(p[0].Error(), tc.key+":")):
				t.Errorf("problems %v, want one of %s", p, tc.key)
			}
		})
	}
}

func TestSecretsAreFoundByTheirTag(t *testing.T) {
	if untagged := config.UntaggedSecrets("channels.matrix", matrix.Section.Type); len(untagged) > 0 {
		t.Errorf("fields that look secret without a secret tag: %v", untagged)
	}
	var cfg config.Config
	c := matrix.Of(&cfg)
	c.AccessToken, c.Password = "syt_secret_token_value", "hunter2-password-value"
	c.Homeserver = "https://bot:url-password-value@matrix.example.org"
	secrets := strings.Join(cfg.Secrets(), "\n")
	for _, want := range []string{c.AccessToken, c.Password, "url-password-value"} {
		if !strings.Contains(secrets, want) {
			t.Errorf("config.Secrets() misses %q: redaction, status and the panel would show it", want)
		}
	}
}
