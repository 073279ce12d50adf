package session

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// oldSessions writes an old <workspace>/sessions/ with real session files
// (written by a Store: live, archived, a torn companion), a large one, one
// the destination already holds with the same bytes (a crash left it
// there) and one whose name the destination holds with other bytes. It
// returns the files of from and of to, by name.
func oldSessions(t *testing.T, from, to string) (old, existing map[string][]byte) {
	t.Helper()
	s := NewStore(from, withCache(Options{Now: stepClock(time.Second)}), zap.NewNop())
	for _, key := range []string{"telegram:42", "discord:1:thread:2", "api:webui:" + string(bytes.Repeat([]byte("@"), 128))} {
		mustAppend(t, s, key, userText("hello "+key), userText("again"))
	}
	if _, err := s.Archive("telegram:42"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "telegram:42", userText("after /new"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20+123)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	writeFile(t, filepath.Join(from, "big_1.jsonl"), big)
	writeFile(t, filepath.Join(from, "telegram_42.jsonl.torn"), []byte(`{"type":"mess`+"\n"))
	writeFile(t, filepath.Join(from, "same_1.jsonl"), []byte("same bytes\n"))
	writeFile(t, filepath.Join(from, "taken_1.jsonl"), []byte("the workspace's\n"))
	writeFile(t, filepath.Join(to, "same_1.jsonl"), []byte("same bytes\n"))
	writeFile(t, filepath.Join(to, "taken_1.jsonl"), []byte("the sessions dir's, newer\n"))
	return readDir(t, from), readDir(t, to)
}

// readDir returns the regular files of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, de := range des {
		if de.Type().IsRegular() {
			out[de.Name()] = readFile(t, filepath.Join(dir, de.Name()))
		}
	}
	return out
}

// lostNothing fails the test unless every old file is whole in one of the
// places it may be during a move, and the destination's own files are
// untouched.
func lostNothing(t *testing.T, from, to string, old, existing map[string][]byte) {
	t.Helper()
	for name, want := range old {
		found := false
		for _, dir := range []string{from, to, filepath.Join(to, DuplicatesDir)} {
			if got, err := os.ReadFile(filepath.Join(dir, name)); err == nil && bytes.Equal(got, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: lost (no whole copy in %s, %s or its duplicates)", name, from, to)
		}
	}
	for name, want := range existing {
		if got := readFile(t, filepath.Join(to, name)); !bytes.Equal(got, want) {
			t.Errorf("%s in the sessions dir was changed", name)
		}
	}
}

// moved fails the test unless the move is complete: every old file is in
// to (the one whose name was taken in its duplicates directory),
// byte-identical, from is gone, and nothing temporary is left.
func moved(t *testing.T, from, to string, old, existing map[string][]byte) {
	t.Helper()
	lostNothing(t, from, to, old, existing)
	if _, err := os.Lstat(from); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old directory still there: %v", err)
	}
	for name, want := range old {
		dir := to
		if name == "taken_1.jsonl" {
			dir = filepath.Join(to, DuplicatesDir)
		}
		if got := readFile(t, filepath.Join(dir, name)); !bytes.Equal(got, want) {
			t.Errorf("%s: moved with other bytes", name)
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", name, fi.Mode(), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(to, moveTmp)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: %v", moveTmp, err)
	}
	if got := readDir(t, filepath.Join(to, DuplicatesDir)); len(got) != 1 {
		t.Errorf("duplicates: %d files, want only taken_1.jsonl", len(got))
	}
}

// crossDevice makes every move between the directories fail as across file
// systems, so the copy path runs.
func crossDevice(oldpath, newpath string) error {
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EXDEV}
}

// TestMoveDirCrashAnywhere: a crash injected after N files, after a copy
// is complete, or after it is in place but before the original is removed,
// loses nothing; a fresh start then finishes the move with every file
// byte-identical, and a third start has nothing to do. On one file system
// and across file systems.
func TestMoveDirCrashAnywhere(t *testing.T) {
	type crashAt struct {
		step string
		nth  int
	}
	for _, mode := range []string{"rename", "copy"} {
		cases := []crashAt{{"", 0}, {"start", 1}, {"start", 4}, {"start", 8}, {"renamed", 1}, {"renamed", 3}}
		if mode == "copy" {
			cases = append(cases, crashAt{"copied", 1}, crashAt{"copied", 5})
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s-%d", mode, c.step, c.nth), func(t *testing.T) {
				base := t.TempDir()
				from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
				old, existing := oldSessions(t, from, to)
				m := mover{from: from, to: to, log: zap.NewNop(), rename: renameNoReplace}
				if mode == "copy" {
					m.rename = crossDevice
				}
				if c.step != "" {
					seen := 0
					m.crash = func(step, _ string) bool {
						if step == c.step {
							seen++
						}
						return seen == c.nth
					}
					if _, err := m.run(); !errors.Is(err, errCrashed) {
						t.Fatalf("run = %v, want the injected crash", err)
					}
					lostNothing(t, from, to, old, existing)
				}
				// The restart: a fresh MoveDir, as the daemon calls it.
				core, logs := observer.New(zapcore.InfoLevel)
				fresh := mover{from: from, to: to, log: zap.New(core), rename: m.rename}
				res, err := fresh.run()
				if err != nil {
					t.Fatal(err)
				}
				moved(t, from, to, old, existing)
				if logs.FilterMessage("moved sessions out of the workspace").Len() != 1 {
					t.Errorf("the move was not logged: %v", logs.All())
				}
				if c.step == "" && (res.Moved != len(old) || res.Duplicates != 1) {
					t.Errorf("result %+v, want %d moved, 1 duplicate", res, len(old))
				}
				if res, err := MoveDir(from, to, "", zap.NewNop()); err != nil || res.Moved != 0 {
					t.Errorf("third start: %+v, %v; want nothing to do", res, err)
				}
			})
		}
	}
}

// TestMoveDirAfterACrashMidCopy: a crash in the middle of copying a file
// leaves a partial copy in the temporary directory; the next start throws it
// away and copies the file again from its original.
func TestMoveDirAfterACrashMidCopy(t *testing.T) {
	base := t.TempDir()
	from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
	old, existing := oldSessions(t, from, to)
	m := mover{from: from, to: to, log: zap.NewNop(), rename: crossDevice,
		crash: func(step, name string) bool { return step == "start" && name == "big_1.jsonl" }}
	if _, err := m.run(); !errors.Is(err, errCrashed) {
		t.Fatalf("run = %v, want the injected crash", err)
	}
	// What the process killed while copying big_1.jsonl left behind.
	writeFile(t, filepath.Join(to, moveTmp, "big_1.jsonl"), old["big_1.jsonl"][:4096])
	m.crash = nil
	if _, err := m.run(); err != nil {
		t.Fatal(err)
	}
	moved(t, from, to, old, existing)
}

// TestMoveDirThenStore: the moved files are the store's sessions in their new
// place, the hashed name included; entries that are not session files stay,
// and keep the old directory, with a warning.
func TestMoveDirThenStore(t *testing.T) {
	base := t.TempDir()
	from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
	long := "api:webui:" + string(bytes.Repeat([]byte("@"), 128))
	old := NewStore(from, withCache(Options{Now: stepClock(time.Second)}), zap.NewNop())
	mustAppend(t, old, "telegram:42", userText("hi"))
	mustAppend(t, old, long, userText("long"))
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(from, "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	l := newLogs(t)
	res, err := MoveDir(from, to, "", l.Logger)
	if err != nil || res.Moved != 2 || len(res.Left) != 1 {
		t.Fatalf("MoveDir = %+v, %v; want 2 moved, notes/ left", res, err)
	}
	if w := l.warnings(); len(w) != 1 {
		t.Errorf("warnings = %q, want one about notes/", w)
	}
	s := newStore(t, to, Options{}, zap.NewNop())
	for key, text := range map[string]string{"telegram:42": "hi", long: "long"} {
		snap, err := s.Get(key)
		if err != nil || len(snap.Messages) != 1 || snap.Messages[0].Text() != text {
			t.Errorf("%s after the move: %+v, %v", key, snap.Messages, err)
		}
	}
	if infos, err := s.List(); err != nil || len(infos) != 2 {
		t.Errorf("List = %+v, %v; want both sessions", infos, err)
	}
}

// TestMoveDirNeverFollowsALink: sessions/ in the workspace may be a link a
// command planted (to /etc, ~/.ssh, or the sessions directory itself). The
// move never follows it: nothing is moved or removed, the link stays, and
// the log says so. (It used to follow the link, which moved the regular
// files of whatever folder it led to into the sessions directory.)
func TestMoveDirNeverFollowsALink(t *testing.T) {
	for _, target := range []string{"outside", "sessions"} {
		t.Run(target, func(t *testing.T) {
			base := t.TempDir()
			from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
			dir := filepath.Join(base, target)
			writeFile(t, filepath.Join(dir, "id_ed25519"), []byte("PRIVATE KEY\n"))
			if err := os.MkdirAll(filepath.Dir(from), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(dir, from); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			res, err := MoveDir(from, to, "", zap.New(core))
			if err != nil || res.Moved != 0 {
				t.Fatalf("MoveDir = %+v, %v", res, err)
			}
			if fi, err := os.Lstat(from); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link is gone: %v", err)
			}
			if got := readFile(t, filepath.Join(dir, "id_ed25519")); string(got) != "PRIVATE KEY\n" {
				t.Errorf("the link's folder changed: %q", got)
			}
			if target == "outside" {
				if _, err := os.Lstat(filepath.Join(to, "id_ed25519")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a file of the linked folder reached the sessions dir: %v", err)
				}
			}
			if logs.FilterMessageSnippet("not followed").Len() != 1 {
				t.Errorf("no warning about the link: %v", logs.All())
			}
		})
	}
}

// TestMoveDirLeavesHardLinksAndFIFOs: a second name of a file kept
// elsewhere, or a FIFO, is not a session file: it stays where it is.
func TestMoveDirLeavesHardLinksAndFIFOs(t *testing.T) {
	base := t.TempDir()
	from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
	secret := filepath.Join(base, "authorized_keys")
	writeFile(t, secret, []byte("ssh-ed25519 AAAA\n"))
	writeFile(t, filepath.Join(from, "telegram_1.jsonl"), []byte("x\n"))
	if err := os.Link(secret, filepath.Join(from, "telegram_2.jsonl")); err != nil {
		t.Skip("no hard links here:", err)
	}
	if err := syscall.Mkfifo(filepath.Join(from, "telegram_3.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := MoveDir(from, to, "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || len(res.Left) != 2 {
		t.Errorf("MoveDir = %+v; want telegram_1 moved, the hard link and the FIFO left", res)
	}
	if _, err := os.Lstat(filepath.Join(to, "telegram_2.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hard link was moved into the sessions dir: %v", err)
	}
}

// TestMoveDirNothingToDo: without an old directory nothing is created.
func TestMoveDirNothingToDo(t *testing.T) {
	base := t.TempDir()
	to := filepath.Join(base, "sessions")
	if res, err := MoveDir(filepath.Join(base, "workspace", "sessions"), to, "", zap.NewNop()); err != nil || res.Moved != 0 {
		t.Fatalf("MoveDir = %+v, %v", res, err)
	}
	if _, err := os.Lstat(to); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("created %s for nothing: %v", to, err)
	}
}

// TestMoveDirOnceEver: the move runs once, ever, not at every start. After
// it ran to its end (a real move, or nothing to move on a fresh install),
// a sessions/ of regular files a command plants in the workspace is not
// imported at any later start, and the start logs it; a move cut short by
// a crash is not marked done and the restart finishes it.
func TestMoveDirOnceEver(t *testing.T) {
	for _, first := range []string{"real move", "fresh install", "crash then restart"} {
		t.Run(first, func(t *testing.T) {
			base := t.TempDir()
			from, to := filepath.Join(base, "workspace", "sessions"), filepath.Join(base, "sessions")
			done := filepath.Join(base, "data", "sessions-moved.json")
			switch first {
			case "real move":
				old, existing := oldSessions(t, from, to)
				if _, err := MoveDir(from, to, done, zap.NewNop()); err != nil {
					t.Fatal(err)
				}
				moved(t, from, to, old, existing)
			case "fresh install":
				if _, err := MoveDir(from, to, done, zap.NewNop()); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(to, "telegram_1.jsonl"), []byte("a real chat\n"))
			case "crash then restart":
				old, existing := oldSessions(t, from, to)
				m := mover{from: from, to: to, done: done, log: zap.NewNop(), rename: renameNoReplace,
					crash: func(step, _ string) bool { return step == "renamed" }}
				if _, err := m.run(); !errors.Is(err, errCrashed) {
					t.Fatalf("run = %v, want the injected crash", err)
				}
				if _, err := os.Stat(done); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a move cut short was marked done: %v", err)
				}
				if _, err := MoveDir(from, to, done, zap.NewNop()); err != nil {
					t.Fatal(err)
				}
				moved(t, from, to, old, existing)
			}
			if _, err := os.Stat(done); err != nil {
				t.Fatalf("the move ran to its end but is not marked done: %v", err)
			}
			// A command plants a real directory of regular files, named as
			// session files, and the daemon restarts (twice).
			writeFile(t, filepath.Join(from, "telegram_99.jsonl"), []byte(`{"type":"message","planted":true}`+"\n"))
			writeFile(t, filepath.Join(from, "id_ed25519"), []byte("PRIVATE KEY\n"))
			before := readDir(t, to)
			for range 2 {
				core, logs := observer.New(zapcore.WarnLevel)
				res, err := MoveDir(from, to, done, zap.New(core))
				if err != nil || res.Moved != 0 {
					t.Fatalf("MoveDir after the one-time move = %+v, %v; want nothing moved", res, err)
				}
				if logs.FilterMessageSnippet("not imported").Len() != 1 {
					t.Errorf("the planted directory was not logged: %v", logs.All())
				}
			}
			if got := readDir(t, to); len(got) != len(before) {
				t.Errorf("the sessions dir changed: %d files, had %d", len(got), len(before))
			}
			for _, name := range []string{"telegram_99.jsonl", "id_ed25519"} {
				if _, err := os.Lstat(filepath.Join(to, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("planted %s reached the sessions dir: %v", name, err)
				}
				if _, err := os.Lstat(filepath.Join(from, name)); err != nil {
					t.Errorf("planted %s was touched: %v", name, err)
				}
			}
		})
	}
}
