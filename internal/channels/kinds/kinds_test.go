package kinds_test

import (
	"reflect"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
)

// TestKindsAreComplete: every row gives what the daemon calls without a
// nil check, and its section is the one its name says.
func TestKindsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range kinds.All {
		if k.Name == "" || seen[k.Name] {
			t.Fatalf("row %q: empty or repeated name", k.Name)
		}
		seen[k.Name] = true
		switch {
		case k.Section.Name != k.Name:
			t.Errorf("%s: section is channels.%s", k.Name, k.Section.Name)
		case k.Section.Type == nil || k.Section.Type.Kind() != reflect.Struct:
			t.Errorf("%s: section type must be a struct", k.Name)
		case k.Section.Validate == nil || len(k.Section.Defaults) == 0:
			t.Errorf("%s: section needs Validate and Defaults", k.Name)
		case k.Enabled == nil || k.Access == nil || k.New == nil || k.Renderer == nil || k.Output == nil || k.SessionKey == nil || k.Target == nil:
			t.Errorf("%s: Enabled, Access, New, Renderer, Output, SessionKey and Target are required", k.Name)
		case k.Fix == "":
			t.Errorf("%s: doctor needs Fix", k.Name)
		}
		cfg := config.Defaults(kinds.Sections()...)
		if k.Enabled(&cfg) {
			t.Errorf("%s: enabled by default", k.Name)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: the defaults do not validate: %v", k.Name, err)
		}
	}
}

// TestSessionKeysRoundTrip: each row reads back the keys it makes, for a
// plain chat and one in a thread, and no row claims another's keys.
func TestSessionKeysRoundTrip(t *testing.T) {
	for _, k := range kinds.All {
		chats := []channels.Chat{{ID: "-100123"}}
		if len(k.ThreadMeta) > 0 {
			// A threaded chat as the row files it: its own reading of a
			// key made with every place key set.
			probe := channels.Chat{ID: "55", Metadata: map[string]string{}}
			for _, m := range k.ThreadMeta {
				probe.Metadata[m] = "77"
			}
			c, ok := k.Target(k.SessionKey(probe))
			if !ok || len(c.Metadata) == 0 {
				t.Errorf("%s: a threaded chat's key %q does not read back as a thread", k.Name, k.SessionKey(probe))
			}
			chats = append(chats, c)
		}
		for _, c := range chats {
			key := k.SessionKey(c)
			got, ok := k.Target(key)
			if !ok || !reflect.DeepEqual(got, c) {
				t.Errorf("%s: Target(%q) = %+v, %v; want %+v", k.Name, key, got, ok, c)
			}
			for _, other := range kinds.All {
				if other.Name != k.Name {
					if _, ok := other.Target(key); ok {
						t.Errorf("%s claims %s's key %q", other.Name, k.Name, key)
					}
				}
			}
			if owner, _, ok := kinds.Target(key); !ok || owner.Name != k.Name {
				t.Errorf("kinds.Target(%q) = %q, %v; want %s", key, owner.Name, ok, k.Name)
			}
		}
		// A plain chat's key is the bus's default (InboundMessage.Key),
		// which cron jobs and the message tool also write.
		plain := bus.InboundMessage{Channel: k.Name, ChatID: "-100123"}
		if got := k.SessionKey(channels.Chat{ID: "-100123"}); got != plain.Key() {
			t.Errorf("%s: a plain chat's key is %q, want the bus's default %q", k.Name, got, plain.Key())
		}
		for _, bad := range []string{"", k.Name, k.Name + ":", "cli:direct", "web:abc", "system:heartbeat"} {
			if _, ok := k.Target(bad); ok {
				t.Errorf("%s: Target(%q) accepted a key that is no chat of it", k.Name, bad)
			}
		}
	}
}

// TestSecretsOfEverySection: every credential-looking key of every row's
// section carries the secret tag (config.TestSecretsAreTagged covers the
// rest of Config).
func TestSecretsOfEverySection(t *testing.T) {
	for _, s := range kinds.Sections() {
		for _, key := range config.UntaggedSecrets("channels."+s.Name, s.Type) {
			t.Errorf("%s looks like it holds a secret but has no secret tag", key)
		}
	}
}
