package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const examplePath = "../../config.example.yaml"

// exampleOnlyInComments are keys the example documents in a comment because
// any value would change behaviour (temperature is unset by default).
var exampleOnlyInComments = []string{"agents.temperature"}

func TestExampleLoadsAndValidates(t *testing.T) {
	isolateEnv(t, "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "TELEGRAM_BOT_TOKEN",
		"TELEGRAM_WEBHOOK_SECRET", "DISCORD_BOT_TOKEN", "TRANSCRIPTION_API_KEY", "BRAVE_API_KEY", "SEARCH_MCP_TOKEN")
	t.Setenv("OPENAI_API_KEY", "sk-example-0123456789")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-example-0123456789")
	cfg, err := Load(examplePath, testSections...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// exampleKeys returns every key the example sets, with entry names under
// providers, routes and tools.mcp_servers replaced by "*".
func exampleKeys(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(prefix string, t reflect.Type, m map[string]any)
	walk = func(prefix string, typ reflect.Type, m map[string]any) {
		typ = deref(typ)
		for k, v := range m {
			var sub reflect.Type
			path := joinPath(prefix, k)
			switch typ.Kind() {
			case reflect.Map:
				path, sub = joinPath(prefix, "*"), typ.Elem()
			case reflect.Struct:
				sub = structKeys(typ)[k]
				if path == "channels."+k {
					sub = sectionKeys(testSections)[k]
				}
			}
			if sub == nil {
				t.Errorf("config.example.yaml: %s is not a known key", path)
				continue
			}
			if nested, ok := v.(map[string]any); ok && isNested(sub) {
				walk(path, sub, nested)
				continue
			}
			keys[path] = true
		}
	}
	walk("", reflect.TypeFor[Config](), tree)
	return keys
}

func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	keys := exampleKeys(t)
	for key := range allDefaults() {
		if !keys[wildcard(key)] {
			t.Errorf("config.example.yaml does not set %s (it has a default)", key)
		}
	}
	for _, f := range allSchemaFields() {
		if keys[f.path] {
			continue
		}
		if slices.Contains(exampleOnlyInComments, f.path) {
			leaf := f.path[strings.LastIndex(f.path, ".")+1:]
			if !regexp.MustCompile(`(?m)^\s*#\s*` + leaf + `:`).Match(data) {
				t.Errorf("config.example.yaml does not show %s in a comment", f.path)
			}
			continue
		}
		t.Errorf("config.example.yaml does not document %s", f.path)
	}
}

// TestExampleCommentsEveryKey checks that each key line has a comment line
// right above it (or belongs to an entry whose keys are documented once, in
// the first entry of its section).
func TestExampleCommentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	documented := map[string]bool{} // leaf names explained so far, per indent
	keyLine := regexp.MustCompile(`^(\s*)([a-z_]+):`)
	for i, line := range lines {
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id := m[1] + m[2]
		commented := i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#")
		if commented {
			documented[id] = true
			continue
		}
		if !documented[id] && !isSection(lines, i) {
			t.Errorf("config.example.yaml:%d: %s has no comment", i+1, strings.TrimSpace(line))
		}
	}
}

// isSection reports whether line i opens a mapping (its value is on the
// following, more indented lines): sections are named, not explained.
func isSection(lines []string, i int) bool {
	if !strings.HasSuffix(strings.TrimSpace(lines[i]), ":") || i+1 >= len(lines) {
		return false
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	return indent(lines[i+1]) > indent(lines[i])
}

// BenchmarkLoadExample measures Load plus Validate of the full example, the
// work `nanobot gateway` does on start.
func BenchmarkLoadExample(b *testing.B) {
	b.Setenv("OPENAI_API_KEY", "sk-example-0123456789")
	b.Setenv("ANTHROPIC_API_KEY", "sk-ant-example-0123456789")
	for b.Loop() {
		cfg, err := Load(examplePath, testSections...)
		if err != nil {
			b.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
