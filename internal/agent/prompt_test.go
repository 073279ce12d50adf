package agent

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
)

func writeWS(t testing.TB, ws, rel, content string) {
	t.Helper()
	path := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewriteSameTick replaces rel's content and puts its old mtime back: what a
// same-size edit within one mtime tick of a coarse file system looks like
// (the workspace was given whole-second mtimes by coarsen first).
func rewriteSameTick(t *testing.T, ws, rel, content string) {
	t.Helper()
	path := filepath.Join(ws, rel)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(content)) != fi.Size() {
		t.Fatalf("rewrite of %s changes its size", rel)
	}
	writeWS(t, ws, rel, content)
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// coarsen gives everything in ws the current second as its mtime, as a file
// system that keeps whole seconds (HFS+, FAT, some network file systems)
// does: only there can a same-size edit keep the mtime for long.
func coarsen(t testing.TB, ws string) {
	t.Helper()
	now := time.Now().Truncate(time.Second)
	err := filepath.WalkDir(ws, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, now, now)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// age sets the mtime of everything in ws an hour back, so every stat of it
// has settled.
func age(t testing.TB, ws string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(ws, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func skillMD(desc string) string {
	return "---\ndescription: " + desc + "\n---\nDo the thing.\n"
}

// buildPrompt builds the prompt and checks the estimate that comes with it.
func buildPrompt(t *testing.T, b *PromptBuilder) string {
	t.Helper()
	p, tokens, err := b.BuildEstimated()
	if err != nil {
		t.Fatal(err)
	}
	if want := history.EstimateText(p); tokens != want {
		t.Fatalf("BuildEstimated: %d tokens, the prompt estimates at %d", tokens, want)
	}
	return p
}

// TestPromptBuilderSeesEveryChange changes each kind of file the prompt
// depends on after a build and checks that the next build shows it, both
// right after the files were written (stats not yet settled, see
// mtimeSettle) and when every stat has long settled (the cached prompt and
// the cached skills/ listing are in use).
func TestPromptBuilderSeesEveryChange(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, ws string)
		// prior, if set, is a change made and built before change.
		prior  func(t *testing.T, ws string)
		change func(t *testing.T, ws string)
		want   string // in the prompt after the change
		gone   string // not in the prompt after the change
		// sameTick changes keep the size and the mtime, which only a write
		// within the mtime's tick does; the stat cannot show them once
		// settled.
		sameTick bool
	}{
		{
			name:   "edit AGENTS.md",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "AGENTS.md", "rule one") },
			change: func(t *testing.T, ws string) { writeWS(t, ws, "AGENTS.md", "rule number two") },
			want:   "rule number two", gone: "rule one",
		},
		{
			name:   "same-size edit of SOUL.md within the mtime tick",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "SOUL.md", "tone: calm") },
			change: func(t *testing.T, ws string) { rewriteSameTick(t, ws, "SOUL.md", "tone: warm") },
			want:   "tone: warm", gone: "tone: calm",
			sameTick: true,
		},
		{
			name:   "create USER.md",
			setup:  func(t *testing.T, ws string) {},
			change: func(t *testing.T, ws string) { writeWS(t, ws, "USER.md", "name: Ada") },
			want:   "## USER.md\n\nname: Ada",
		},
		{
			name:  "delete TOOLS.md",
			setup: func(t *testing.T, ws string) { writeWS(t, ws, "TOOLS.md", "tool note") },
			change: func(t *testing.T, ws string) {
				if err := os.Remove(filepath.Join(ws, "TOOLS.md")); err != nil {
					t.Fatal(err)
				}
			},
			gone: "tool note",
		},
		{
			name:   "edit memory",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, MemoryFile, "likes tea") },
			change: func(t *testing.T, ws string) { writeWS(t, ws, MemoryFile, "likes coffee") },
			want:   "# Memory\n\nlikes coffee", gone: "likes tea",
		},
		{
			name:   "same-size edit of memory within the mtime tick",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, MemoryFile, "likes tea") },
			change: func(t *testing.T, ws string) { rewriteSameTick(t, ws, MemoryFile, "likes gin") },
			want:   "likes gin", gone: "likes tea",
			sameTick: true,
		},
		{
			name:   "create memory",
			setup:  func(t *testing.T, ws string) {},
			change: func(t *testing.T, ws string) { writeWS(t, ws, MemoryFile, "born in May") },
			want:   "born in May",
		},
		{
			name:   "add a skill",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc")) },
			change: func(t *testing.T, ws string) { writeWS(t, ws, "skills/beta/SKILL.md", skillMD("beta-desc")) },
			want:   "beta-desc",
		},
		{
			name:   "add the first skill",
			setup:  func(t *testing.T, ws string) {},
			change: func(t *testing.T, ws string) { writeWS(t, ws, "skills/beta/SKILL.md", skillMD("beta-desc")) },
			want:   "beta-desc",
		},
		{
			name: "remove a skill",
			setup: func(t *testing.T, ws string) {
				writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc"))
				writeWS(t, ws, "skills/beta/SKILL.md", skillMD("beta-desc"))
			},
			change: func(t *testing.T, ws string) {
				if err := os.RemoveAll(filepath.Join(ws, "skills", "alpha")); err != nil {
					t.Fatal(err)
				}
			},
			want: "beta-desc", gone: "alpha-desc",
		},
		{
			name:   "edit a skill",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc")) },
			change: func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-new-desc")) },
			want:   "alpha-new-desc", gone: "alpha-desc",
		},
		{
			name:   "same-size edit of a skill within the mtime tick",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc")) },
			change: func(t *testing.T, ws string) { rewriteSameTick(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-DESC")) },
			want:   "alpha-DESC", gone: "alpha-desc",
			sameTick: true,
		},
		{
			// Its SKILL.md is stat'd only if skills/ was listed again
			// after it was added.
			name:   "edit a skill added after the first build",
			setup:  func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc")) },
			prior:  func(t *testing.T, ws string) { writeWS(t, ws, "skills/beta/SKILL.md", skillMD("beta-desc")) },
			change: func(t *testing.T, ws string) { writeWS(t, ws, "skills/beta/SKILL.md", skillMD("beta-new-desc")) },
			want:   "beta-new-desc", gone: "beta-desc",
		},
		{
			// The SKILL.md keeps its stamp; only the listing shows the
			// new name.
			name:  "rename a skill",
			setup: func(t *testing.T, ws string) { writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc")) },
			change: func(t *testing.T, ws string) {
				if err := os.Rename(filepath.Join(ws, "skills", "alpha"), filepath.Join(ws, "skills", "gamma")); err != nil {
					t.Fatal(err)
				}
			},
			want: "<name>gamma</name>", gone: "<name>alpha</name>",
		},
		{
			name: "SKILL.md written into an existing skill directory",
			setup: func(t *testing.T, ws string) {
				if err := os.MkdirAll(filepath.Join(ws, "skills", "delta"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			change: func(t *testing.T, ws string) { writeWS(t, ws, "skills/delta/SKILL.md", skillMD("delta-desc")) },
			want:   "delta-desc",
		},
	}
	for _, settled := range []bool{false, true} {
		for _, tt := range tests {
			if settled && tt.sameTick {
				continue
			}
			name := tt.name
			if settled {
				name += " after the stats settled"
			}
			t.Run(name, func(t *testing.T) {
				ws := t.TempDir()
				tt.setup(t, ws)
				if settled {
					age(t, ws)
				} else if tt.sameTick {
					coarsen(t, ws)
				}
				b := &PromptBuilder{Workspace: ws, Files: wstest.Files(t, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test", Skills: skills.Loader{}}
				before := buildPrompt(t, b)
				if again := buildPrompt(t, b); again != before {
					t.Fatalf("prompt changed without a change to the workspace")
				}
				if tt.prior != nil {
					tt.prior(t, ws)
					before = buildPrompt(t, b)
					if settled {
						age(t, ws)
						before = buildPrompt(t, b)
					}
				}
				if tt.gone != "" && !strings.Contains(before, tt.gone) {
					t.Fatalf("setup: prompt lacks %q", tt.gone)
				}
				tt.change(t, ws)
				after := buildPrompt(t, b)
				if tt.want != "" && !strings.Contains(after, tt.want) {
					t.Errorf("prompt after the change lacks %q:\n%s", tt.want, after)
				}
				if tt.gone != "" && strings.Contains(after, tt.gone) {
					t.Errorf("prompt after the change still has %q", tt.gone)
				}
			})
		}
	}
}

// TestPromptBuilderTrustsSettledStats pins the other half of the contract:
// once every stat has settled, the prompt and the skills/ listing come from
// the cache, so a change no stat shows (content swapped with size and mtime
// kept, which no real edit does) is not seen.
func TestPromptBuilderTrustsSettledStats(t *testing.T) {
	ws := t.TempDir()
	writeWS(t, ws, "AGENTS.md", "rule one")
	writeWS(t, ws, "skills/alpha/SKILL.md", skillMD("alpha-desc"))
	age(t, ws)
	b := &PromptBuilder{Workspace: ws, Files: wstest.Files(t, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "test", Skills: skills.Loader{}}
	before := buildPrompt(t, b)

	rewriteSameTick(t, ws, "AGENTS.md", "rule two")
	dir := filepath.Join(ws, "skills")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after := buildPrompt(t, b); after != before {
		t.Errorf("prompt rebuilt although no stat changed")
	}
	if files, _ := b.skillFiles(time.Now()); len(files) != 1 {
		t.Errorf("skills/ listed again although its stat did not change: %v", files)
	}
}

// TestStampSettles pins how long a stat is distrusted: an mtime with a
// fraction of a second comes from a fine-grained file system and settles
// after fineSettle; a whole-second one may come from a coarse file system and
// settles after mtimeSettle.
func TestStampSettles(t *testing.T) {
	whole := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	fine := whole.Add(123456789 * time.Nanosecond)
	tests := []struct {
		name  string
		stamp stamp
		age   time.Duration
		want  bool
	}{
		{"missing file", stamp{}, 0, true},
		{"fine mtime, just written", stamp{mtime: fine.UnixNano(), ok: true}, 10 * time.Millisecond, false},
		{"fine mtime, past fineSettle", stamp{mtime: fine.UnixNano(), ok: true}, fineSettle, true},
		{"whole-second mtime, past fineSettle", stamp{mtime: whole.UnixNano(), ok: true}, time.Second, false},
		{"whole-second mtime, past mtimeSettle", stamp{mtime: whole.UnixNano(), ok: true}, mtimeSettle, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := time.Unix(0, tt.stamp.mtime).Add(tt.age)
			if got := tt.stamp.settled(at); got != tt.want {
				t.Errorf("settled %v after the mtime = %v, want %v", tt.age, got, tt.want)
			}
		})
	}
}
