package builtin_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
)

// env has only the binaries in bins on PATH, no environment, and runs on linux.
func env(bins ...string) skills.Env {
	return skills.Env{
		LookPath: func(name string) (string, error) {
			if slices.Contains(bins, name) {
				return "/usr/bin/" + name, nil
			}
			return "", errors.New("not found")
		},
		Getenv: func(string) string { return "" },
		GOOS:   "linux",
	}
}

func load(t *testing.T, l skills.Loader) map[string]skills.Skill {
	t.Helper()
	list, err := l.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	out := map[string]skills.Skill{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

func TestBuiltinSkillsParseAndDeclareRequirements(t *testing.T) {
	got := load(t, skills.Loader{Builtin: builtin.FS(), Env: env()})
	tests := []struct {
		name    string
		always  bool
		missing []string
	}{
		{name: "memory", always: true},
		{name: "cron"},
		{name: "github", missing: []string{"CLI: gh"}},
		{name: "weather", missing: []string{"CLI: curl"}},
		{name: "skill-creator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := got[tt.name]
			if !ok {
				t.Fatalf("built-in skill %q missing; have %v", tt.name, got)
			}
			if !s.Builtin || s.Location != skills.BuiltinScheme+tt.name+"/SKILL.md" {
				t.Errorf("builtin=%v location=%q", s.Builtin, s.Location)
			}
			if s.Always != tt.always || !slices.Equal(s.Missing, tt.missing) {
				t.Errorf("always=%v missing=%v, want %v %v", s.Always, s.Missing, tt.always, tt.missing)
			}
			if len(s.Description) < 20 || len(s.Body) < 200 {
				t.Errorf("description %q or body (%d bytes) too thin to teach anything", s.Description, len(s.Body))
			}
		})
	}
	if len(got) != len(tests) {
		t.Errorf("%d built-in skills, the test knows %d: add the new one to the table", len(got), len(tests))
	}
}

func TestBuiltinAvailabilityAndOverride(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, "skills", "weather", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("---\nname: weather\ndescription: My station's data.\n---\nRead station.csv."), 0o600); err != nil {
		t.Fatal(err)
	}
	got := load(t, skills.Loader{Workspace: os.DirFS(filepath.Join(ws, "skills")), Builtin: builtin.FS(), Env: env("gh", "curl")})
	if gh := got["github"]; !gh.Available() {
		t.Errorf("github should be available with gh on PATH: missing %v", gh.Missing)
	}
	w := got["weather"]
	if w.Builtin || w.Location != "skills/weather/SKILL.md" || w.Body != "Read station.csv." {
		t.Errorf("the workspace skill should override the built-in one: %+v", w)
	}
	summary := skills.Summary([]skills.Skill{got["github"], got["memory"], got["weather"]})
	if !strings.Contains(summary, "<location>builtin:github/SKILL.md</location>") || strings.Contains(summary, "curl") {
		t.Errorf("summary:\n%s", summary)
	}
}
