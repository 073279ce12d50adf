package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const docsPath = "../../docs/configuration.md"

// exampleDiffers are the keys config.example.yaml deliberately sets to
// something other than the default, and why. Every other key the example
// sets must show the default, so a reader of the example reads the defaults.
var exampleDiffers = map[string]string{
	"providers.openai.api_key":     "shows ${OPENAI_API_KEY}: keys belong in the environment",
	"providers.anthropic.api_key":  "shows ${ANTHROPIC_API_KEY}",
	"channels.telegram.allow_from": "shows where your user id goes",
	"channels.discord.allow_from":  "shows where your user id goes",
	"agents.fallbacks":             "shows a fallback route",
	"tools.exec.deny_patterns":     "shows the pattern syntax",
	"tools.exec.expose":            "shows an entry",
}

// defaultKeys lists every key with a default, as the docs table names it:
// entry defaults under providers and tools.mcp_servers with "*" for the name.
func defaultKeys() map[string]any {
	all := allDefaults()
	for k, v := range providerDefaults {
		all["providers.*."+k] = v
	}
	for k, v := range mcpServerDefaults {
		all["tools.mcp_servers.*."+k] = v
	}
	return all
}

func formatDefault(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return `""`
		}
		return x
	case []string:
		return "[" + strings.Join(x, ", ") + "]"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
	}
	return fmt.Sprint(v)
}

// defaultsTable is the Markdown table docs/configuration.md carries between
// its defaults markers.
func defaultsTable() string {
	all := defaultKeys()
	var b strings.Builder
	b.WriteString("| Key | Default |\n|-----|---------|\n")
	for _, k := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", k, formatDefault(all[k]))
	}
	return b.String()
}

const (
	tableBegin = "<!-- defaults:begin -->\n"
	tableEnd   = "<!-- defaults:end -->"
)

// TestDefaultsAgreeWithExampleAndDocs proves the three places a default is
// shown agree: docs/configuration.md lists every key of defaults with its
// value, config.example.yaml sets each to its default (unless exampleDiffers
// says why not), and Defaults decodes them and passes Validate but for the
// keys a user must fill in.
func TestDefaultsAgreeWithExampleAndDocs(t *testing.T) {
	t.Run("docs", func(t *testing.T) {
		data, err := os.ReadFile(docsPath)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(data)
		i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q ... %q markers", docsPath, tableBegin, tableEnd)
		}
		want := defaultsTable()
		if os.Getenv("UPDATE_CONFIG_DOCS") != "" {
			doc = doc[:i+len(tableBegin)] + want + doc[j:]
			if err := os.WriteFile(docsPath, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		got := doc[i+len(tableBegin) : j]
		for k, v := range defaultKeys() {
			row := fmt.Sprintf("| `%s` | `%s` |", k, formatDefault(v))
			if !strings.Contains(got, row+"\n") {
				t.Errorf("%s does not list %s (want the row %s)", docsPath, k, row)
			}
		}
		if got != want {
			t.Errorf("%s: the defaults table is not the generated one; run UPDATE_CONFIG_DOCS=1 go test ./internal/config -run %s", docsPath, t.Name())
		}
	})

	t.Run("example", func(t *testing.T) {
		isolateEnv(t, "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "TELEGRAM_BOT_TOKEN",
			"TELEGRAM_WEBHOOK_SECRET", "DISCORD_BOT_TOKEN", "TRANSCRIPTION_API_KEY", "BRAVE_API_KEY", "SEARCH_MCP_TOKEN")
		t.Setenv("OPENAI_API_KEY", "sk-example-0123456789")
		t.Setenv("ANTHROPIC_API_KEY", "sk-ant-example-0123456789")
		example, err := Load(examplePath, testSections...)
		if err != nil {
			t.Fatal(err)
		}
		def := Defaults(testSections...)
		// Load resolves paths against the file's directory; compare as
		// written.
		dir, err := filepath.Abs(filepath.Dir(examplePath))
		if err != nil {
			t.Fatal(err)
		}
		finish(&def, dir)
		set := exampleKeys(t)
		for _, k := range slices.Sorted(maps.Keys(allDefaults())) {
			if _, ok := exampleDiffers[k]; ok || !set[wildcard(k)] {
				continue
			}
			got, want := field(t, example, k).Interface(), field(t, &def, k).Interface()
			if !sameValue(got, want) {
				t.Errorf("config.example.yaml sets %s to %v, the default is %v (show the default, or say why not in exampleDiffers)", k, got, want)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(exampleDiffers)) {
			if _, ok := allDefaults()[k]; !ok {
				t.Errorf("exampleDiffers names %s, which has no default", k)
				continue
			}
			if !set[wildcard(k)] {
				t.Errorf("exampleDiffers names %s, which the example does not set", k)
				continue
			}
			if got := field(t, example, k).Interface(); sameValue(got, field(t, &def, k).Interface()) {
				t.Errorf("exampleDiffers names %s, but the example shows its default %v: drop it from the list", k, got)
			}
		}
	})

	t.Run("defaults", func(t *testing.T) {
		// Defaults is what Load gives for an empty file and no environment.
		isolateEnv(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(path, testSections...)
		if err != nil {
			t.Fatal(err)
		}
		d := Defaults(testSections...)
		resolved := d
		resolved.Providers = maps.Clone(d.Providers)
		finish(&resolved, dir)
		// The sections' descriptions hold funcs, which DeepEqual never
		// finds equal; their values in Kinds are compared.
		resolved.Channels.sections, loaded.Channels.sections = nil, nil
		if !reflect.DeepEqual(&resolved, loaded) {
			t.Errorf("Defaults() (resolved against %s) = %+v\nLoad(empty file) = %+v", dir, resolved, *loaded)
		}
		if keyOf[time.Duration](t, &d, "channels.telegram.stall_grace") != 15*time.Second || keyOf[time.Duration](t, &d, "channels.telegram.edit_interval") != time.Second {
			t.Errorf("Defaults() did not decode the durations: %+v", d.Channels.Kinds)
		}
		// The defaults alone are a valid config; the one value a user must
		// supply, the default model's key, is a degraded provider, not a
		// configuration error.
		if err := d.Validate(); err != nil {
			t.Errorf("Defaults().Validate() = %v", err)
		}
		if p := d.ProviderProblem("openai"); !strings.Contains(p, "OPENAI_API_KEY") {
			t.Errorf("Defaults().ProviderProblem(openai) = %q, want it to name OPENAI_API_KEY", p)
		}
	})
}

// sameValue compares decoded values, an empty slice equal to a nil one.
func sameValue(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() == reflect.Slice && vb.Kind() == reflect.Slice && va.Len() == 0 && vb.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
