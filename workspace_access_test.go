package nanobot_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fileCalls are the functions that open, stat, list, create, rename or
// remove a path, by import path; nil means every function of the package.
// A call of one in product code is a file access the test must account for.
var fileCalls = map[string][]string{
	"os": {"Open", "OpenFile", "ReadFile", "WriteFile", "Create", "CreateTemp", "Stat", "Lstat", "Rename", "Remove",
		"RemoveAll", "ReadDir", "Mkdir", "MkdirAll", "MkdirTemp", "OpenRoot", "OpenInRoot", "DirFS", "Readlink", "Symlink",
		"Link", "Chmod", "Chown", "Lchown", "Chtimes", "Truncate", "CopyFS"},
	"io/ioutil":     nil,
	"path/filepath": {"Walk", "WalkDir", "Glob", "EvalSymlinks"},
	"syscall": {"Open", "Openat", "Creat", "Mkfifo", "Mknod", "Rename", "Renameat", "Unlink", "Unlinkat", "Stat", "Lstat",
		"Link", "Symlink", "Readlink", "Mkdir", "Rmdir", "Truncate"},
	"golang.org/x/sys/unix": {"Open", "Openat", "Openat2", "Creat", "Mkfifo", "Mknod", "Rename", "Renameat", "Renameat2",
		"Unlink", "Unlinkat", "Stat", "Lstat", "Fstatat", "Link", "Linkat", "Symlink", "Readlink", "Mkdir", "Mkdirat", "Rmdir",
		"Truncate"},
}

// fileAccessLayer is the one place that may reach the workspace by path:
// internal/workspace (workspace.Files for the daemon, workspace.Root for the
// file tools). The lab (internal/testkit) is no product code.
var fileAccessLayer = []string{"internal/workspace/", "internal/testkit/"}

// fileAccessAllowed lists, file by file, the product code that calls some
// of fileCalls on paths that are not in the workspace: which calls, and
// why. A new entry or call needs a reason that says why no path under the
// workspace reaches it; anything that does goes through workspace.Files.
var fileAccessAllowed = map[string]struct{ calls, why string }{
	"cmd/nanobot/agent.go":                     {"os.OpenFile", "the REPL's log file next to the config, outside the workspace"},
	"cmd/nanobot/onboard.go":                   {"os.Stat", "compares the invoked binary with the one on PATH, and looks for the container runtimes' marker files at /"},
	"internal/config/overlay.go":               {"os.ReadFile", "the secrets overlay (secrets.yaml) in the data dir"},
	"internal/atomicfile/atomicfile.go":        {"os.CreateTemp os.Open os.Remove os.Rename", "whole-file replacement of state outside the workspace (pairing, web conversations, cursors)"},
	"internal/channels/cursorkv/store.go":      {"os.ReadFile", "imports the Discord cursor file from the data dir"},
	"internal/channels/discord/cursorstore.go": {"os.ReadFile", "the Discord cursor file in the data dir"},
	"internal/channels/pairing.go":             {"os.MkdirAll os.ReadFile os.Stat", "the pairing store in the data dir"},
	"internal/channels/statefile.go":           {"os.ReadFile", "channel state files in the data dir"},
	"internal/channels/telegram/journal.go":    {"filepath.Glob os.MkdirAll os.OpenFile os.ReadFile os.Remove os.Stat", "the Telegram update journal in the data dir"},
	"internal/config/load.go":                  {"os.ReadFile", "the config file"},
	"internal/config/starter.go":               {"os.MkdirAll os.OpenFile os.Remove os.Stat", "writes a new config file (onboard)"},
	"internal/daemon/doctor_checks.go":         {"os.CreateTemp os.Remove os.Stat", "doctor: stats the workspace directory itself and the marker of the one-time sessions move in the data dir, and probes that the workspace, data and sessions dirs are writable with a fresh O_EXCL temp file of a random name (no link can redirect it)"},
	"internal/daemon/sandbox.go":               {"os.ReadDir os.Stat", "stats the paths tools.exec.expose names and lists the data dir, for the sandbox policy"},
	"internal/filelock/filelock.go":            {"os.OpenFile", "lock files outside the workspace (sessions dir, data dir); the workspace's locks are opened by workspace.Files.Guard"},
	"internal/logging/secretfiles.go":          {"os.ReadFile os.Stat", "reads the secret files (web token) in the data dir, to redact them"},
	"internal/sandbox/sandbox.go":              {"filepath.EvalSymlinks os.MkdirTemp os.ReadDir os.RemoveAll os.Stat", "the launcher: its private temp dir and the system paths of the Landlock policy"},
	"internal/sandbox/supervise_linux.go":      {"filepath.Glob os.ReadFile", "the launcher walks /proc/<pid>/task/*/children and /proc/<pid>/stat to kill a command's descendants"},
	"internal/schedule/atomic.go":              {"os.MkdirAll", "the cron jobs file in the data dir, outside the workspace (docs/schedule.md#where-jobs-live)"},
	"internal/schedule/cron.go":                {"os.MkdirAll os.Stat", "the cron jobs file (see atomic.go)"},
	"internal/schedule/jobs.go":                {"os.Open os.Rename", "the cron jobs file (see atomic.go)"},
	"internal/schedule/heartbeat.go":           {"os.ReadFile", "the heartbeat's state file in the data dir; HEARTBEAT.md itself is read through workspace.Files"},
	"internal/session/load.go":                 {"os.OpenFile", "session files in agents.sessions_dir, outside the workspace"},
	"internal/session/store.go":                {"os.OpenFile os.ReadDir", "session files in agents.sessions_dir, outside the workspace"},
	"internal/session/write.go":                {"os.Lstat os.MkdirAll os.Open os.OpenFile os.Rename", "session files in agents.sessions_dir, outside the workspace"},
	"internal/session/rename_linux.go":         {"unix.Renameat2", "renames into agents.sessions_dir without replacing (the start-up move)"},
	"internal/session/nofollow_unix.go":        {"os.Stat", "checks that /proc/self/fd/N is the directory the start-up move opened"},
	"internal/session/migrate.go":              {"os.Link os.Lstat os.MkdirAll os.Open os.OpenFile os.ReadDir os.Remove os.RemoveAll os.Rename os.Stat", "the start-up move of an old <workspace>/sessions/: it opens that directory once with O_NOFOLLOW|O_DIRECTORY, checks it is what it lstat'ed, and works below the descriptor (/proc/self/fd/N), moving only regular files with one link (TestMoveDirNeverFollowsALink)"},
	"internal/usage/budget.go":                 {"os.ReadFile", "the budget's state (lifts, warnings) in usage.dir, outside the workspace (config validation refuses a usage.dir inside it)"},
	"internal/usage/ledger.go":                 {"os.MkdirAll os.Open os.OpenFile os.ReadDir os.Remove os.Stat", "the usage ledger in usage.dir, outside the workspace"},
	"internal/usage/readonly.go":               {"os.Stat", "the usage ledger in usage.dir, outside the workspace"},
	"internal/usage/usagejs/usagejs.go":        {"os.ReadFile", "the ledger's stream cursor in usage.dir, outside the workspace"},
	"internal/web/auth.go":                     {"os.Chmod os.CreateTemp os.Link os.ReadFile os.Remove os.Stat os.WriteFile", "the web token file in the data dir"},
}

// TestDaemonFileAccess fails when product code outside the workspace layer
// opens, stats, lists, renames or removes a path by itself: every file the
// daemon reaches in the workspace goes through workspace.Files, which never
// follows a link out, opens only regular files without blocking and caps
// every read (docs/tools.md#the-daemon-and-the-workspace). The rest is
// listed in fileAccessAllowed with its reason; a stale entry fails too.
func TestDaemonFileAccess(t *testing.T) {
	used := map[string]bool{}
	checked := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p = filepath.ToSlash(p)
		if d.IsDir() {
			if p == "bench" || p == "workspace-template" || strings.HasPrefix(d.Name(), ".") && p != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || !strings.HasPrefix(p, "internal/") && !strings.HasPrefix(p, "cmd/") {
			return nil
		}
		if slices.ContainsFunc(fileAccessLayer, func(l string) bool { return strings.HasPrefix(p, l) }) {
			return nil
		}
		checked++
		for _, call := range fileCallsIn(t, p) {
			fn, _, _ := strings.Cut(call, " ")
			if allow, ok := fileAccessAllowed[p]; ok && slices.Contains(strings.Fields(allow.calls), fn) {
				used[p+" "+fn] = true
				continue
			}
			t.Errorf("%s: %s reaches a path outside the workspace layer; open workspace files through workspace.Files, "+
				"or add the file to fileAccessAllowed with why no workspace path reaches it", p, call)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked; is the walk right?", checked)
	}
	for p, allow := range fileAccessAllowed {
		for _, fn := range strings.Fields(allow.calls) {
			if !used[p+" "+fn] {
				t.Errorf("fileAccessAllowed lets %s call %s, which it does not (any more): remove it", p, fn)
			}
		}
	}
}

// fileCallsIn returns the fileCalls the Go file p refers to, as
// "pkg.Func" at "line" (a reference counts, not only a call: rename:
// os.Rename passes the function on).
func fileCallsIn(t *testing.T, p string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{} // import name -> path
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = path
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		path, ok := local[id.Name]
		if !ok {
			return true
		}
		fns, watched := fileCalls[path]
		if watched && (fns == nil || slices.Contains(fns, sel.Sel.Name)) {
			out = append(out, id.Name+"."+sel.Sel.Name+" at line "+strconv.Itoa(fset.Position(sel.Pos()).Line))
		}
		return true
	})
	return out
}
