package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a home directory holding a workspace, and a directory outside it:
//
//	<tmp>/home/.nanobot/workspace/   the workspace (ws)
//	    notes/a.md                   "inside"
//	    notes/sessions/n.md          a "sessions" that is not the top-level one
//	    sessions/s.jsonl             a session log
//	    link_in -> notes             relative symlink inside
//	    link_in_abs -> <ws>/notes/a.md
//	    link_out -> <out>/secret.txt
//	    link_out_dir -> <out>
//	    link_up -> ../..             relative symlink climbing out
//	    link_sess -> sessions
//	    link_sess_file -> sessions/s.jsonl
//	    link_sess_dotdot -> notes/../sessions
//	    loop1 -> loop2 -> loop1
//	<tmp>/out/secret.txt             "secret"
//	<tmp>/out/to_sess -> <ws>/sessions
//	<tmp>/out/to_notes -> <ws>/notes
type fixture struct {
	home, ws, out string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{
		home: filepath.Join(tmp, "home"),
		ws:   filepath.Join(tmp, "home", ".nanobot", "workspace"),
		out:  filepath.Join(tmp, "out"),
	}
	mkdir(t, filepath.Join(f.ws, "notes", "sessions"))
	mkdir(t, filepath.Join(f.ws, "sessions"))
	mkdir(t, f.out)
	write(t, filepath.Join(f.ws, "notes", "a.md"), "inside")
	write(t, filepath.Join(f.ws, "notes", "sessions", "n.md"), "note")
	write(t, filepath.Join(f.ws, "sessions", "s.jsonl"), "log")
	write(t, filepath.Join(f.out, "secret.txt"), "secret")
	symlink(t, "notes", filepath.Join(f.ws, "link_in"))
	symlink(t, filepath.Join(f.ws, "notes", "a.md"), filepath.Join(f.ws, "link_in_abs"))
	symlink(t, filepath.Join(f.out, "secret.txt"), filepath.Join(f.ws, "link_out"))
	symlink(t, f.out, filepath.Join(f.ws, "link_out_dir"))
	symlink(t, "../..", filepath.Join(f.ws, "link_up"))
	symlink(t, "sessions", filepath.Join(f.ws, "link_sess"))
	symlink(t, "sessions/s.jsonl", filepath.Join(f.ws, "link_sess_file"))
	symlink(t, "notes/../sessions", filepath.Join(f.ws, "link_sess_dotdot"))
	symlink(t, "loop2", filepath.Join(f.ws, "loop1"))
	symlink(t, "loop1", filepath.Join(f.ws, "loop2"))
	symlink(t, filepath.Join(f.ws, "sessions"), filepath.Join(f.out, "to_sess"))
	symlink(t, filepath.Join(f.ws, "notes"), filepath.Join(f.out, "to_notes"))
	return f
}

func (f fixture) open(t *testing.T, restrict bool) *Root {
	t.Helper()
	r, err := OpenRoot(f.ws, Options{Restrict: restrict, Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func mkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("d/", maxPathBytes/2+1)
	type tc struct {
		name string
		path string
		want string // relative result, or absolute for outside paths
		err  error
	}
	// Cases that behave the same with and without the restriction.
	common := []tc{
		{"relative", "notes/a.md", "notes/a.md", nil},
		{"dot segments", "./notes/../notes/./a.md", "notes/a.md", nil},
		{"workspace itself", ".", ".", nil},
		{"absolute inside", filepath.Join(f.ws, "notes", "a.md"), "notes/a.md", nil},
		{"tilde inside", "~/.nanobot/workspace/notes/a.md", "notes/a.md", nil},
		{"not yet existing", "new/dir/file.txt", "new/dir/file.txt", nil},
		{"below a file", "notes/a.md/x", "notes/a.md/x", nil},
		{"symlink inside to inside", "link_in/a.md", "notes/a.md", nil},
		{"absolute symlink inside to inside", "link_in_abs", "notes/a.md", nil},
		{"nested sessions name is fine", "notes/sessions/n.md", "notes/sessions/n.md", nil},
		{"sessions prefix is fine", "sessions-old/x", "sessions-old/x", nil},
		{"sessions dir", "sessions", "", ErrSessions},
		{"sessions slash", "sessions/", "", ErrSessions},
		{"sessions file", "sessions/s.jsonl", "", ErrSessions},
		{"sessions dot", "./sessions/s.jsonl", "", ErrSessions},
		{"sessions via dotdot", "notes/../sessions/s.jsonl", "", ErrSessions},
		{"sessions upper case", "SESSIONS/s.jsonl", "", ErrSessions},
		{"sessions mixed case", "Sessions", "", ErrSessions},
		{"sessions absolute", filepath.Join(f.ws, "sessions", "s.jsonl"), "", ErrSessions},
		{"sessions double slash", f.ws + "//sessions//s.jsonl", "", ErrSessions},
		{"sessions tilde", "~/.nanobot/workspace/sessions/s.jsonl", "", ErrSessions},
		{"sessions new file", "sessions/new.jsonl", "", ErrSessions},
		{"symlink to sessions dir", "link_sess/s.jsonl", "", ErrSessions},
		{"symlink to sessions dir itself", "link_sess", "", ErrSessions},
		{"symlink to session file", "link_sess_file", "", ErrSessions},
		{"symlink with dotdot to sessions", "link_sess_dotdot/s.jsonl", "", ErrSessions},
		{"outside symlink into sessions", filepath.Join(f.out, "to_sess", "s.jsonl"), "", ErrSessions},
		// A path outside that leads into the workspace is judged by where it
		// leads: inside, so allowed, and reported by its inside name.
		{"outside symlink into the workspace", filepath.Join(f.out, "to_notes", "a.md"), "notes/a.md", nil},
		{"empty", "", "", ErrInvalid},
		{"NUL byte", "notes/a.md\x00.txt", "", ErrInvalid},
		{"NUL byte first", "\x00", "", ErrInvalid},
		{"too long", long, "", ErrInvalid},
		{"name too long", strings.Repeat("n", maxNameBytes+1), "", ErrInvalid},
		{"tilde user", "~root/x", "", ErrInvalid},
	}
	restricted := []tc{
		{"dotdot", "../x", "", ErrOutside},
		{"dotdot deep", "notes/../../x", "", ErrOutside},
		{"dotdot many", "../../../../../../etc/passwd", "", ErrOutside},
		{"absolute outside", "/etc/passwd", "", ErrOutside},
		{"root", "/", "", ErrOutside},
		{"tilde alone", "~", "", ErrOutside},
		{"tilde outside", "~/x", "", ErrOutside},
		{"symlink inside to outside file", "link_out", "", ErrOutside},
		{"symlink inside to outside dir", "link_out_dir/secret.txt", "", ErrOutside},
		{"relative symlink climbing out", "link_up/x", "", ErrOutside},
		{"symlink loop", "loop1", "", errLoop},
	}
	unrestricted := []tc{
		{"dotdot", "../x", filepath.Join(f.home, ".nanobot", "x"), nil},
		{"absolute outside", "/etc/passwd", "/etc/passwd", nil},
		{"tilde outside", "~/x", filepath.Join(f.home, "x"), nil},
		{"symlink inside to outside file", "link_out", filepath.Join(f.out, "secret.txt"), nil},
		{"symlink inside to outside dir", "link_out_dir/secret.txt", filepath.Join(f.out, "secret.txt"), nil},
		{"relative symlink climbing out", "link_up/x", filepath.Join(f.home, "x"), nil},
	}
	run := func(t *testing.T, r *Root, cases []tc) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := r.Resolve(c.path)
				if errors.Is(c.err, errLoop) {
					if err == nil || !strings.Contains(err.Error(), "too many levels") {
						t.Fatalf("Resolve(%q) = %q, %v; want a symlink loop error", c.path, got, err)
					}
					return
				}
				if !errors.Is(err, c.err) {
					t.Fatalf("Resolve(%q) = %q, %v; want error %v", c.path, got, err, c.err)
				}
				if err != nil {
					var pe *PathError
					if !errors.As(err, &pe) {
						t.Fatalf("error %v is not a *PathError", err)
					}
					return
				}
				if got != filepath.FromSlash(c.want) {
					t.Fatalf("Resolve(%q) = %q, want %q", c.path, got, c.want)
				}
			})
		}
	}
	t.Run("restricted", func(t *testing.T) {
		r := f.open(t, true)
		run(t, r, common)
		run(t, r, restricted)
	})
	t.Run("unrestricted", func(t *testing.T) {
		r := f.open(t, false)
		run(t, r, common)
		run(t, r, unrestricted)
	})
}

// errLoop marks cases expecting the symlink-loop error, which has no sentinel.
var errLoop = errors.New("loop")

func TestResolveErrorMessages(t *testing.T) {
	f := newFixture(t)
	r := f.open(t, true)
	for _, c := range []struct{ path, want string }{
		{"../x", "path escapes the workspace: ../x"},
		{"sessions/s.jsonl", "sessions/ holds the chat logs and is off limits to tools: sessions/s.jsonl"},
		{"link_out", "path escapes the workspace: link_out (a symlink in it leads to " + filepath.Join(f.out, "secret.txt") + ")"},
		{"a\x00b", `invalid path: a\x00b (contains a NUL byte)`},
	} {
		_, err := r.Resolve(c.path)
		if err == nil || err.Error() != c.want {
			t.Errorf("Resolve(%q) error = %v, want %q", c.path, err, c.want)
		}
	}
}

// A workspace whose sessions/ is itself a symlink to another disk: the real
// location is off limits too, even unrestricted and by absolute path.
func TestResolveSymlinkedSessionsDir(t *testing.T) {
	f := newFixture(t)
	real := filepath.Join(f.out, "realsess")
	mkdir(t, real)
	write(t, filepath.Join(real, "x.jsonl"), "log")
	if err := os.RemoveAll(filepath.Join(f.ws, "sessions")); err != nil {
		t.Fatal(err)
	}
	symlink(t, real, filepath.Join(f.ws, "sessions"))
	for _, restrict := range []bool{true, false} {
		r := f.open(t, restrict)
		for _, p := range []string{"sessions/x.jsonl", filepath.Join(real, "x.jsonl"), real} {
			if _, err := r.Resolve(p); !errors.Is(err, ErrSessions) {
				t.Errorf("restrict=%v Resolve(%q) error = %v, want ErrSessions", restrict, p, err)
			}
		}
	}
}

// The workspace may be reached through a symlink (~/.nanobot -> /data).
func TestOpenRootThroughSymlink(t *testing.T) {
	f := newFixture(t)
	alias := filepath.Join(f.out, "alias")
	symlink(t, f.ws, alias)
	r, err := OpenRoot(alias, Options{Restrict: true, Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Dir() != f.ws {
		t.Fatalf("Dir() = %q, want %q", r.Dir(), f.ws)
	}
	for p, want := range map[string]string{
		filepath.Join(alias, "notes", "a.md"): "notes/a.md",
		filepath.Join(f.ws, "notes", "a.md"):  "notes/a.md",
	} {
		if got, err := r.Resolve(p); err != nil || got != filepath.FromSlash(want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

func TestOpenRootMissing(t *testing.T) {
	if _, err := OpenRoot(filepath.Join(t.TempDir(), "nope"), Options{}); err == nil {
		t.Fatal("OpenRoot of a missing directory succeeded")
	}
}

func TestTildeWithoutHome(t *testing.T) {
	f := newFixture(t)
	r := f.open(t, true)
	r.home = ""
	if _, err := r.Resolve("~/x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Resolve(~/x) without a home = %v, want ErrInvalid", err)
	}
}
