package skills

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// fakeEnv has gh and curl installed, GITHUB_TOKEN unset, and runs on linux.
var fakeEnv = Env{
	LookPath: func(name string) (string, error) {
		if name == "gh" || name == "curl" {
			return "/usr/bin/" + name, nil
		}
		return "", errors.New("not found")
	},
	Getenv: func(k string) string {
		if k == "HOME" {
			return "/home/u"
		}
		return ""
	},
	GOOS: "linux",
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    Skill
		wantErr bool
	}{
		{
			name: "yaml map metadata",
			src:  "---\nname: github\ndescription: Use gh.\nmetadata:\n  nanobot:\n    requires:\n      bins: [gh]\n      env: [GITHUB_TOKEN]\n---\n# GitHub\nbody\n",
			want: Skill{Name: "github", Description: "Use gh.", Requires: Requirements{Bins: []string{"gh"}, Env: []string{"GITHUB_TOKEN"}},
				Missing: []string{"ENV: GITHUB_TOKEN"}, Body: "# GitHub\nbody"},
		},
		{
			name: "json string metadata under openclaw",
			src:  "---\nname: weather\ndescription: \"Weather via wttr.in\"\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"curl\"]}}}\n---\nUse curl.",
			want: Skill{Name: "weather", Description: "Weather via wttr.in", Requires: Requirements{Bins: []string{"curl"}}, Body: "Use curl."},
		},
		{
			name: "json string metadata as quoted scalar",
			src:  "---\nname: x\nmetadata: '{\"nanobot\":{\"os\":[\"darwin\"],\"always\":true}}'\n---\nb",
			want: Skill{Name: "x", Always: true, Requires: Requirements{OS: []string{"darwin"}}, Missing: []string{"OS: darwin"}, Body: "b"},
		},
		{
			name: "always and missing binary",
			src:  "---\nname: tmux\nalways: true\nmetadata:\n  nanobot: {requires: {bins: [tmux]}}\n---\nbody",
			want: Skill{Name: "tmux", Always: true, Requires: Requirements{Bins: []string{"tmux"}}, Missing: []string{"CLI: tmux"}, Body: "body"},
		},
		{
			name: "no frontmatter takes the directory name",
			src:  "# Just markdown\n",
			want: Skill{Name: "dir", Body: "# Just markdown"},
		},
		{
			name: "CRLF and BOM",
			src:  "\ufeff---\r\nname: crlf\r\ndescription: d\r\n---\r\nbody\r\n",
			want: Skill{Name: "crlf", Description: "d", Body: "body"},
		},
		{name: "unclosed frontmatter", src: "---\nname: x\n", wantErr: true},
		{name: "bad yaml", src: "---\nname: [unclosed\n---\n", wantErr: true},
		{name: "metadata string not json", src: "---\nmetadata: \"{nope\"\n---\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("dir", []byte(tt.src), fakeEnv)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse succeeded: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLoaderOverrideAndSummary(t *testing.T) {
	ws := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("skills/weather/SKILL.md", "---\nname: weather\ndescription: My own weather <skill> & more\n---\nworkspace body")
	write("skills/broken/SKILL.md", "---\nname: [\n---\n")
	write("skills/notes.txt", "not a skill dir")
	builtin := fstest.MapFS{
		"memory/SKILL.md":  {Data: []byte("---\nname: memory\ndescription: Remember things.\nalways: true\n---\nUse MEMORY.md.")},
		"weather/SKILL.md": {Data: []byte("---\nname: weather\ndescription: builtin weather\n---\nbuiltin body")},
		"github/SKILL.md":  {Data: []byte("---\nname: github\ndescription: GitHub via gh.\nmetadata: {\"nanobot\":{\"requires\":{\"bins\":[\"gh\"],\"env\":[\"GITHUB_TOKEN\"]}}}\n---\ngh body")},
	}
	list, err := Loader{Workspace: os.DirFS(filepath.Join(ws, "skills")), Builtin: builtin, Env: fakeEnv}.Load()
	if err == nil {
		t.Error("a broken skill file should be reported")
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if want := []string{"github", "memory", "weather"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("skills = %v, want %v (broken one skipped, others kept)", names, want)
	}
	if list[2].Builtin || list[2].Body != "workspace body" || list[2].Location != "skills/weather/SKILL.md" {
		t.Errorf("workspace skill should override the builtin: %+v", list[2])
	}
	goldenFile(t, "summary.xml", Summary(list))
	goldenFile(t, "always.md", AlwaysBodies(list))
}

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

// TestParseAll covers the one parser of both skill sources: where a skill is
// said to live, whether it is built in, and how a malformed one is named.
func TestParseAll(t *testing.T) {
	fsys := fstest.MapFS{
		"good/SKILL.md":  {Data: []byte("---\nname: good\ndescription: d\n---\nbody")},
		"bad/SKILL.md":   {Data: []byte("---\nname: [\n---\n")},
		"empty/other.md": {Data: []byte("no SKILL.md here")},
		"file.md":        {Data: []byte("not a directory")},
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		builtin  bool
		location string
		errStart string
	}{
		{"builtin", true, "builtin:good/SKILL.md", "builtin skill bad: "},
		{"workspace", false, "skills/good/SKILL.md", "skill bad: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			byName := map[string]Skill{"good": {Name: "good", Body: "earlier"}}
			errs := parseAll(byName, fsys, entries, fakeEnv, tt.builtin)
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.errStart) {
				t.Errorf("errors = %v, want one starting %q", errs, tt.errStart)
			}
			if len(byName) != 1 {
				t.Errorf("skills = %v, want only good (no SKILL.md or not a directory: no skill)", byName)
			}
			if s := byName["good"]; s.Body != "body" || s.Builtin != tt.builtin || s.Location != tt.location {
				t.Errorf("good = %+v, want it replaced, builtin %v, at %s", s, tt.builtin, tt.location)
			}
		})
	}
}
