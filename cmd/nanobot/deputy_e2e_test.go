package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nanobot-go/nanobot/internal/sandbox"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The escape suite's section for the daemon as the confused deputy (issue
// 35, docs/tools.md#the-daemon-and-the-workspace): for every path the
// daemon reads or writes in the workspace — the rows of
// workspace.DaemonFiles, so a new file is covered as it is added — a link
// to a secret outside, a FIFO and a huge sparse file are planted where a
// command could plant them, and a turn of the real binary must carry no
// secret to the model, not hang, not crash; doctor must name each one.

// deputyRuns says how the suite exercises the daemon's use of each row:
// "turn" and "start" are a run of the real binary here; any other value
// names the test of the package that runs that flow with the same bad
// files. A row without an entry fails the suite: a new file the daemon
// reaches needs a way to prove it is reached safely.
var deputyRuns = map[string]string{
	"AGENTS.md":           "turn",
	"SOUL.md":             "turn",
	"USER.md":             "turn",
	"TOOLS.md":            "turn",
	workspace.MemoryFile:  "turn",
	"skills/":             "turn",
	"skills/*/SKILL.md":   "turn",
	"sessions/":           "start",
	workspace.HistoryFile: "internal/workspace TestFilesWriteNeverThroughALink; internal/memory TestCommitRefusesHostileFiles",
	"HEARTBEAT.md":        "internal/schedule TestHeartbeatSkipsHostileTasksFile",
	"inbox/":              "internal/inbox TestInboxRefusesHostileFiles",
	"inbox/*":             "internal/inbox TestInboxRefusesHostileFiles",
	"**":                  "internal/web TestSentFileRefusesHostileFiles",
	workspace.MemoryLock:  "internal/workspace TestFilesWriteNeverThroughALink",
	".bootstrap.lock":     "internal/workspace TestFilesWriteNeverThroughALink; internal/web TestPanelReplacesHostileFile",
	// The terminal's agent runs no scheduler: here the file stays for
	// doctor to name; the gateway's migration meets the same plants there.
	workspace.LegacyJobsFile: "internal/schedule TestMigrateTreatsTheWorkspaceFileAsHostile",
}

// deputyPath is where the suite plants a bad file for the row d.
func deputyPath(d workspace.DaemonFile) string {
	p := strings.TrimSuffix(d.Path, "/")
	if p == "**" {
		return "projects/sent.txt"
	}
	return strings.ReplaceAll(p, "*", "planted")
}

// deputyPlant is one kind of bad file. dirs: it is planted on the
// directory rows (files below a planted directory cannot be planted too).
type deputyPlant struct {
	name string
	dirs bool
	// capped: the file is bad only where the daemon reads it whole (a
	// row with a cap); a huge HISTORY.md is appended to, a huge lock is
	// locked, and neither is read.
	capped bool
	// text: the file is bad only where it must be text (a prompt file).
	text  bool
	plant func(t *testing.T, e *env, full string, i int)
}

var deputyPlants = []deputyPlant{
	{name: "link to a secret", plant: func(t *testing.T, e *env, full string, i int) {
		data := filepath.Join(e.home, ".nanobot")
		// The secrets of the issue, in turn: the config with its literal
		// key, the daemon's environment, the web token.
		targets := []string{filepath.Join(data, "config.yaml"), "/proc/self/environ", filepath.Join(data, "web-token")}
		target := targets[i%len(targets)]
		if rel, err := filepath.Rel(filepath.Dir(full), target); err == nil && i%2 == 0 && !strings.HasPrefix(target, "/proc") {
			target = rel // ../config.yaml, as the command wrote it
		}
		symlink(t, target, full)
	}},
	{name: "link to a folder of secrets", dirs: true, plant: func(t *testing.T, e *env, full string, _ int) {
		// A folder outside holding what a skill or a session file would
		// be: the config's text.
		dir := filepath.Join(e.home, "secrets")
		writeTestFile(t, filepath.Join(dir, "leak", "SKILL.md"), "---\nname: leak\ndescription: "+escAPIKey+"\nalways: true\n---\n"+escWebToken)
		writeTestFile(t, filepath.Join(dir, "telegram_7.jsonl"), escPairingCode+"\n")
		symlink(t, dir, full)
	}},
	{name: "FIFO", plant: func(t *testing.T, _ *env, full string, _ int) { mkfifo(t, full) }},
	{name: "FIFO", dirs: true, plant: func(t *testing.T, _ *env, full string, _ int) { mkfifo(t, full) }},
	{name: "directory", plant: func(t *testing.T, _ *env, full string, _ int) {
		if err := os.Mkdir(full, 0o700); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "invalid UTF-8", text: true, plant: func(t *testing.T, _ *env, full string, _ int) {
		writeTestFile(t, full, "fine so far \xff\xfe\x00 not text")
	}},
	{name: "64 GB sparse file", capped: true, plant: func(t *testing.T, _ *env, full string, _ int) {
		writeTestFile(t, full, "")
		if err := os.Truncate(full, 64<<30); err != nil {
			t.Skip("no sparse files here:", err)
		}
	}},
}

// deputyModes are the exec sandbox's modes the suite runs in: the
// daemon's own protections are not Landlock's, so they hold in each.
var deputyModes = []struct {
	name, mode string
	env        []string
	landlock   bool
}{
	{name: "landlock", mode: "auto", landlock: true},
	{name: "no-landlock", mode: "auto", env: []string{"NANOBOT_TEST_LANDLOCK_ABI=0"}},
	{name: "sandbox-off", mode: "off"},
}

// TestSandboxEscapeSuiteConfusedDeputy is the escape suite's section for
// the daemon itself.
func TestSandboxEscapeSuiteConfusedDeputy(t *testing.T) {
	for _, d := range workspace.DaemonFiles {
		if deputyRuns[d.Path] == "" {
			t.Errorf("%s is in workspace.DaemonFiles but the suite does not say how it is exercised (deputyRuns)", d.Path)
		}
	}
	for _, m := range deputyModes {
		t.Run(m.name, func(t *testing.T) {
			if m.landlock && sandbox.ABI() < 1 {
				t.Skip("this kernel has no Landlock")
			}
			for _, p := range deputyPlants {
				t.Run(fmt.Sprintf("%s/dirs=%v", p.name, p.dirs), func(t *testing.T) {
					deputyCase(t, m.mode, m.env, p)
				})
			}
		})
	}
}

func deputyCase(t *testing.T, mode string, extraEnv []string, p deputyPlant) {
	e := escapeHome(t, mode, true, "[]")
	ws := e.workspace()
	var planted []string
	for i, d := range workspace.DaemonFiles {
		if d.Dir() != p.dirs || p.text && !d.Text() {
			continue
		}
		rel := deputyPath(d)
		full := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		_ = os.RemoveAll(full) // the fixture's AGENTS.md
		p.plant(t, e, full, i)
		if !p.capped || d.Max > 0 {
			planted = append(planted, rel)
		}
	}
	// Twice: the first start installs the template around the bad files,
	// the second is a restart with them in place (the crash loop of a 64 GB
	// AGENTS.md).
	for range 2 {
		out, bodies := deputyTurn(t, e, extraEnv...)
		noLeak(t, bodies)
		if leaked := leaks(out); len(leaked) > 0 {
			t.Errorf("the binary's output carried %v", leaked)
		}
		if strings.Count(out, "workspace file left out") > len(planted) {
			t.Errorf("more than one log line per bad file:\n%s", out)
		}
	}
	// The start-up move never followed a link into the folder of secrets.
	if _, err := os.Stat(filepath.Join(e.home, ".nanobot", "sessions", "telegram_7.jsonl")); err == nil {
		t.Error("the start-up move followed the sessions link")
	}
	doctor, _ := e.command(e.escapeEnv(extraEnv...), "doctor").CombinedOutput()
	for _, rel := range planted {
		if rel == "projects/sent.txt" {
			continue // a path only the model names; nothing to list
		}
		if !strings.Contains(string(doctor), rel+" is ") && !strings.Contains(string(doctor), filepath.Join(ws, rel)+" is a link") {
			t.Errorf("doctor does not report %s:\n%s", rel, doctor)
		}
	}
	if leaked := leaks(string(doctor)); len(leaked) > 0 {
		t.Errorf("doctor's output carried %v", leaked)
	}
}

// TestSandboxEscapeSuiteDeputyPlantedByExec: the one exec call
// plants the bootstrap links itself. Under Landlock the command may not be
// allowed to make them; without it, or with the sandbox off, it is (that
// is what is exposed, and the log says which). Either way the next turn's
// prompt carries no secret.
func TestSandboxEscapeSuiteDeputyPlantedByExec(t *testing.T) {
	for _, m := range deputyModes {
		t.Run(m.name, func(t *testing.T) {
			if m.landlock && sandbox.ABI() < 1 {
				t.Skip("this kernel has no Landlock")
			}
			e := escapeHome(t, m.mode, true, "[]")
			results, _ := e.runTools(t, map[string]string{
				"plant": `ln -sf ../config.yaml USER.md; ln -sf /proc/self/environ SOUL.md; ln -sf ../web-token TOOLS.md; ls -l USER.md SOUL.md TOOLS.md`,
			}, nil, m.env...)
			if fi, err := os.Lstat(filepath.Join(e.workspace(), "USER.md")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				t.Logf("mode %s: a command can plant links in the workspace; the daemon must refuse them", m.name)
			} else {
				t.Logf("mode %s: the sandbox kept the command from planting the links:\n%s", m.name, results["plant"])
			}
			_, bodies := deputyTurn(t, e, m.env...)
			noLeak(t, bodies)
		})
	}
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
