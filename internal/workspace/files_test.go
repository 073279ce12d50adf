package workspace

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func TestFileOperations(t *testing.T) {
	f := newFixture(t)
	r := f.open(t, true)

	if err := r.MkdirAll("docs/deep", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFileAtomic("docs/deep/x.txt", []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(f.ws, "docs", "deep", "x.txt")); got != "one" {
		t.Fatalf("content = %q", got)
	}
	// Replacing keeps the existing permission bits.
	if err := os.Chmod(filepath.Join(f.ws, "docs", "deep", "x.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFileAtomic("docs/deep/x.txt", []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := r.Stat("docs/deep/x.txt")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || fi.Size() != 3 {
		t.Fatalf("after replace: mode %v size %d", fi.Mode(), fi.Size())
	}
	data, err := r.ReadFile("docs/deep/x.txt", 10)
	if err != nil || string(data) != "two" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, err := r.ReadFile("docs/deep/x.txt", 2); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile over the limit = %v, want ErrTooLarge", err)
	}
	if _, err := r.ReadFile("docs", 10); err == nil {
		t.Fatal("ReadFile of a directory succeeded")
	}
	// No temporary files are left behind.
	entries, err := r.ReadDir("docs/deep")
	if err != nil || len(entries) != 1 || entries[0].Name() != "x.txt" {
		t.Fatalf("ReadDir = %v, %v", entries, err)
	}

	entries, err = r.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"docs", "link_in", "link_in_abs", "link_out", "link_out_dir", "link_sess", "link_sess_dotdot", "link_sess_file", "link_up", "loop1", "loop2", "notes", "sessions"}
	if len(names) != len(want) {
		t.Fatalf("ReadDir(.) = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("ReadDir(.) = %v, want %v (sorted)", names, want)
		}
	}

	// Writing the workspace itself or over a directory is refused.
	if err := r.WriteFileAtomic(".", []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFileAtomic(.) succeeded")
	}
	if err := r.WriteFileAtomic("docs", []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFileAtomic over a directory succeeded")
	}
	// Writing through a symlink inside replaces the target, keeping the link.
	if err := r.WriteFileAtomic("link_in/a.md", []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(f.ws, "notes", "a.md")); got != "edited" {
		t.Fatalf("target content = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(f.ws, "link_in")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link_in is no longer a symlink: %v %v", fi, err)
	}
	// Missing parent: a clear not-exist error naming the path.
	err = r.WriteFileAtomic("nodir/x.txt", []byte("x"), 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("write without parent = %v, want not-exist", err)
	}
	if _, err := r.Stat("nope"); !errors.Is(err, fs.ErrNotExist) || err.Error() != "no such file or directory: nope" {
		t.Fatalf("Stat(nope) = %v", err)
	}
}

// Every operation refuses what Resolve refuses, in both modes.
func TestOperationsRefuse(t *testing.T) {
	f := newFixture(t)
	ops := map[string]func(r *Root, p string) error{
		"Open": func(r *Root, p string) error {
			fh, err := r.Open(p)
			if err == nil {
				_ = fh.Close()
			}
			return err
		},
		"ReadFile":        func(r *Root, p string) error { _, err := r.ReadFile(p, 1<<20); return err },
		"WriteFileAtomic": func(r *Root, p string) error { return r.WriteFileAtomic(p, []byte("pwned"), 0o600) },
		"Stat":            func(r *Root, p string) error { _, err := r.Stat(p); return err },
		"ReadDir":         func(r *Root, p string) error { _, err := r.ReadDir(p); return err },
		"MkdirAll":        func(r *Root, p string) error { return r.MkdirAll(p, 0o700) },
	}
	cases := []struct {
		path     string
		restrict bool
		want     error
	}{
		{"sessions/s.jsonl", true, ErrSessions},
		{"sessions/s.jsonl", false, ErrSessions},
		{"link_sess/s.jsonl", false, ErrSessions},
		{"SESSIONS", false, ErrSessions},
		{"link_out", true, ErrOutside},
		{"link_out_dir/secret.txt", true, ErrOutside},
		{"../../../out/secret.txt", true, ErrOutside},
	}
	for name, op := range ops {
		for _, c := range cases {
			r := f.open(t, c.restrict)
			if err := op(r, c.path); !errors.Is(err, c.want) {
				t.Errorf("%s(%q) restrict=%v = %v, want %v", name, c.path, c.restrict, err, c.want)
			}
		}
	}
	if got := read(t, filepath.Join(f.out, "secret.txt")); got != "secret" {
		t.Fatalf("outside file changed: %q", got)
	}
	if got := read(t, filepath.Join(f.ws, "sessions", "s.jsonl")); got != "log" {
		t.Fatalf("session file changed: %q", got)
	}
}

func TestUnrestrictedOutside(t *testing.T) {
	f := newFixture(t)
	r := f.open(t, false)
	data, err := r.ReadFile("link_out", 100)
	if err != nil || string(data) != "secret" {
		t.Fatalf("ReadFile(link_out) = %q, %v", data, err)
	}
	out := filepath.Join(f.out, "new.txt")
	if err := r.WriteFileAtomic(out, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, out); got != "hello" {
		t.Fatalf("content = %q", got)
	}
}

// A symlink swapped between the check and the open (the classic TOCTOU race):
// the check sees notes/ as a real directory inside; before the open, notes/ is
// replaced by a symlink to the outside directory. os.Root resolves the path
// again in the kernel and refuses to leave the workspace.
func TestSwapBetweenCheckAndOpen(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.out, "a.md"), "outside twin")
	swapToOutside := func() {
		if err := os.Rename(filepath.Join(f.ws, "notes"), filepath.Join(f.ws, "notes.bak")); err != nil {
			t.Fatal(err)
		}
		symlink(t, f.out, filepath.Join(f.ws, "notes"))
	}
	r := f.open(t, true)
	r.afterResolve = swapToOutside
	fh, err := r.Open("notes/a.md")
	if err == nil {
		b, _ := io.ReadAll(fh)
		_ = fh.Close()
		t.Fatalf("open after the swap succeeded and read %q", b)
	}
	if !errors.Is(err, ErrOutside) {
		t.Fatalf("open after the swap = %v, want ErrOutside", err)
	}

	// The same race against an atomic write: nothing is written outside.
	f2 := newFixture(t)
	f = f2
	write(t, filepath.Join(f.out, "a.md"), "outside twin")
	r = f.open(t, true)
	r.afterResolve = swapToOutside
	if err := r.WriteFileAtomic("notes/a.md", []byte("pwned"), 0o600); !errors.Is(err, ErrOutside) {
		t.Fatalf("write after the swap = %v, want ErrOutside", err)
	}
	if got := read(t, filepath.Join(f.out, "a.md")); got != "outside twin" {
		t.Fatalf("outside file changed to %q", got)
	}
}

// A swap that leads into sessions/ stays inside the workspace, so os.Root
// allows it; the check of the open file (its real path) refuses it. That check
// needs /proc, so it runs on Linux.
func TestSwapIntoSessions(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the open-file check uses /proc/self/fd")
	}
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "sessions", "a.md"), "session twin")
	swap := func() {
		if err := os.Rename(filepath.Join(f.ws, "notes"), filepath.Join(f.ws, "notes.bak")); err != nil {
			t.Fatal(err)
		}
		symlink(t, "sessions", filepath.Join(f.ws, "notes"))
	}
	r := f.open(t, false)
	r.afterResolve = swap
	if _, err := r.Open("notes/a.md"); !errors.Is(err, ErrSessions) {
		t.Fatalf("open after a swap into sessions = %v, want ErrSessions", err)
	}
	// O_TRUNC must not destroy the session file before the refusal.
	if err := os.Remove(filepath.Join(f.ws, "notes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.ws, "notes.bak"), filepath.Join(f.ws, "notes")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenFile("notes/a.md", os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, ErrSessions) {
		t.Fatalf("truncating open after a swap into sessions = %v, want ErrSessions", err)
	}
	if got := read(t, filepath.Join(f.ws, "sessions", "a.md")); got != "session twin" {
		t.Fatalf("session file changed to %q", got)
	}
}

// A goroutine flips a symlink between an inside and an outside directory
// while reads go through it. Whatever the interleaving, no read may return the
// outside content.
func TestSymlinkFlipRace(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.out, "a.md"), "outside twin")
	r := f.open(t, true)
	flip := filepath.Join(f.ws, "flip")
	symlink(t, "notes", flip)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		targets := []string{f.out, "notes"}
		tmp := filepath.Join(f.ws, "flip.tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Remove(tmp)
			if err := os.Symlink(targets[i%2], tmp); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, flip); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var ok, refused int
	for range 2000 {
		data, err := r.ReadFile("flip/a.md", 100)
		switch {
		case err == nil && string(data) == "inside":
			ok++
		case err == nil:
			t.Fatalf("read %q through a flipping symlink", data)
		default:
			refused++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads inside, %d refused", ok, refused)
}

// Hard links are invisible to path checks: ws/hl.txt and out/secret.txt are
// the same file under two names, and nothing in "hl.txt" says so. The only
// sign is the link count, so with the restriction on, files with more than
// one link are refused for reading and for in-place writing. An atomic write
// replaces the name instead and leaves the other file alone.
func TestHardLinks(t *testing.T) {
	f := newFixture(t)
	hl := filepath.Join(f.ws, "hl.txt")
	if err := os.Link(filepath.Join(f.out, "secret.txt"), hl); err != nil {
		t.Skipf("hard links not supported here: %v", err)
	}
	r := f.open(t, true)
	if _, err := r.ReadFile("hl.txt", 100); !errors.Is(err, ErrHardLink) {
		t.Fatalf("read of a hard link = %v, want ErrHardLink", err)
	}
	if _, err := r.OpenFile("hl.txt", os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, ErrHardLink) {
		t.Fatalf("truncating open of a hard link = %v, want ErrHardLink", err)
	}
	if got := read(t, filepath.Join(f.out, "secret.txt")); got != "secret" {
		t.Fatalf("outside file changed to %q", got)
	}
	if err := r.WriteFileAtomic("hl.txt", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(f.out, "secret.txt")); got != "secret" {
		t.Fatalf("atomic write changed the other name's file to %q", got)
	}
	if data, err := r.ReadFile("hl.txt", 100); err != nil || string(data) != "new" {
		t.Fatalf("after the write the file is its own: %q, %v", data, err)
	}

	// Unrestricted, outside files are fair game, but a second name for a
	// session log is still refused.
	if err := os.Link(filepath.Join(f.ws, "sessions", "s.jsonl"), filepath.Join(f.ws, "log.txt")); err != nil {
		t.Fatal(err)
	}
	u := f.open(t, false)
	if _, err := u.ReadFile("log.txt", 100); !errors.Is(err, ErrSessions) {
		t.Fatalf("unrestricted read of a hard link to a session = %v, want ErrSessions", err)
	}
	if _, err := r.ReadFile("log.txt", 100); !errors.Is(err, ErrHardLink) {
		t.Fatalf("restricted read of a hard link to a session = %v, want ErrHardLink", err)
	}
}

// TestSessionsDirOutsideTheWorkspace: the sessions dir (agents.sessions_dir,
// outside the workspace) is refused like sessions/ in every mode — by its
// path, through a symlink in the workspace, through ~, and as a hard link —
// while other files outside stay reachable when unrestricted. Without the
// option an unrestricted root would read them, which is what it guards.
func TestSessionsDirOutsideTheWorkspace(t *testing.T) {
	f := newFixture(t)
	chats := filepath.Join(filepath.Dir(f.out), "home", ".nanobot", "sessions")
	mkdir(t, chats)
	write(t, filepath.Join(chats, "telegram_42.jsonl"), "other chat")
	symlink(t, chats, filepath.Join(f.ws, "link_chats"))
	if err := os.Link(filepath.Join(chats, "telegram_42.jsonl"), filepath.Join(f.ws, "copy.txt")); err != nil {
		t.Fatal(err)
	}
	paths := []string{chats, filepath.Join(chats, "telegram_42.jsonl"), "link_chats/telegram_42.jsonl",
		"~/.nanobot/sessions/telegram_42.jsonl", "../sessions/telegram_42.jsonl", "copy.txt"}
	for _, restrict := range []bool{false, true} {
		r, err := OpenRoot(f.ws, Options{Restrict: restrict, Home: f.home, SessionsDir: chats})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if data, err := r.ReadFile(p, 100); err == nil {
				t.Errorf("restrict=%v: read %s = %q", restrict, p, data)
			} else if !restrict && !errors.Is(err, ErrSessions) {
				t.Errorf("unrestricted read %s = %v, want ErrSessions", p, err)
			}
		}
		if err := r.WriteFileAtomic("link_chats/new.jsonl", []byte("x"), 0o600); err == nil {
			t.Errorf("restrict=%v: wrote into the sessions dir", restrict)
		}
		if !restrict {
			if data, err := r.ReadFile(filepath.Join(f.out, "secret.txt"), 100); err != nil || string(data) != "secret" {
				t.Errorf("unrestricted read outside = %q, %v", data, err)
			}
		}
		r.Close()
	}
	// The same root without the option reads the other chat: the option is
	// what refuses it.
	r, err := OpenRoot(f.ws, Options{Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if data, err := r.ReadFile("link_chats/telegram_42.jsonl", 100); err != nil || string(data) != "other chat" {
		t.Errorf("without SessionsDir: %q, %v (the test's premise)", data, err)
	}
}
