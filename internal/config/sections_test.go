package config

import (
	"maps"
	"reflect"
	"slices"
	"testing"
)

// testSections are the channel table's sections (set by
// sections_ext_test.go before any test runs).
var testSections []ChannelSection

// keyOf reads the field a dotted key decodes into.
func keyOf[T any](t *testing.T, c *Config, key string) T {
	t.Helper()
	return field(t, c, key).Interface().(T)
}

// TestSectionsAreTheTable: the tests of this package see the real channel
// sections.
func TestSectionsAreTheTable(t *testing.T) {
	if len(testSections) == 0 {
		t.Fatal("no channel sections: sections_ext_test.go did not run")
	}
}

// allDefaults is defaults with every channel section's, under its key.
func allDefaults() map[string]any {
	all := maps.Clone(defaults)
	for _, s := range testSections {
		for k, v := range s.Defaults {
			all["channels."+s.Name+"."+k] = v
		}
	}
	return all
}

// allSchemaFields is every leaf key of Config and of the sections.
func allSchemaFields() []schemaField {
	out := schemaFields("", reflect.TypeFor[Config]())
	for _, s := range testSections {
		out = append(out, schemaFields("channels."+s.Name, s.Type)...)
	}
	return out
}

// set sets the field a dotted key decodes into (a channel's section
// included) to v, for a test's mutation of a loaded config.
func set(c *Config, key string, v any) {
	f, ok := lookup(c, key)
	if !ok {
		panic("no field for " + key)
	}
	if v == nil {
		f.Set(reflect.Zero(f.Type()))
		return
	}
	f.Set(reflect.ValueOf(v).Convert(f.Type()))
}

// TestSecretsAreTagged: every field of Config and of every channel's
// section whose name looks like it holds a credential carries the secret
// tag, so that Secrets and Redacted (logs, status, doctor, the panel) find
// it. A new api_key or token without a tag fails here.
func TestSecretsAreTagged(t *testing.T) {
	missing := UntaggedSecrets("", reflect.TypeFor[Config]())
	for _, s := range testSections {
		missing = append(missing, UntaggedSecrets("channels."+s.Name, s.Type)...)
	}
	for _, key := range missing {
		t.Errorf("%s looks like it holds a secret but its field has no secret tag (secret:\"true\", \"url\", \"names\", or \"no\" with a reason)", key)
	}
}

// TestUntaggedSecretsFindsAField: the walk above sees an untagged token,
// in a squashed part and in a map of structs.
func TestUntaggedSecretsFindsAField(t *testing.T) {
	type inner struct {
		Password string `mapstructure:"password"`
	}
	type section struct {
		Token  string           `mapstructure:"token"`
		Tagged string           `mapstructure:"api_key" secret:"true"`
		Name   string           `mapstructure:"name"`
		Inner  inner            `mapstructure:",squash"`
		Peers  map[string]inner `mapstructure:"peers"`
	}
	got := UntaggedSecrets("channels.x", reflect.TypeFor[section]())
	want := []string{"channels.x.token", "channels.x.password", "channels.x.peers.*.password"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UntaggedSecrets = %v, want %v", got, want)
	}
}

// TestSecretsReachEverySection: a section's tagged fields are secrets
// and are masked, whatever channel they belong to.
func TestSecretsReachEverySection(t *testing.T) {
	for _, s := range testSections {
		c := Defaults(testSections...)
		secret := "s3cret-of-" + s.Name + "-0123456789"
		set(&c, "channels."+s.Name+"."+s.TokenKey, secret)
		if !slices.Contains(c.Secrets(), secret) {
			t.Errorf("%s: Secrets() misses channels.%s.%s", s.Name, s.Name, s.TokenKey)
		}
		r := c.Redacted()
		if got := keyOf[string](t, &r, "channels."+s.Name+"."+s.TokenKey); got != mask {
			t.Errorf("%s: Redacted token = %q, want %q", s.Name, got, mask)
		}
		if got := keyOf[string](t, &c, "channels."+s.Name+"."+s.TokenKey); got != secret {
			t.Errorf("%s: Redacted changed the original's token to %q", s.Name, got)
		}
	}
}
