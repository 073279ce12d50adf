package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// hostile plants one kind of bad file at rel in the workspace ws; secret is
// a file outside the workspace holding a secret.
type hostile struct {
	name  string
	plant func(t *testing.T, ws, rel, secret string)
	// want is the error the daemon's read must wrap.
	want error
}

func hostiles() []hostile {
	return []hostile{
		{"relative link out", func(t *testing.T, ws, rel, secret string) { symlink(t, secret, filepath.Join(ws, rel)) }, ErrOutside},
		{"link to /proc/self/environ", func(t *testing.T, ws, rel, _ string) { symlink(t, "/proc/self/environ", filepath.Join(ws, rel)) }, ErrOutside},
		{"link up and out", func(t *testing.T, ws, rel, secret string) {
			target, err := filepath.Rel(filepath.Dir(filepath.Join(ws, rel)), secret)
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, target, filepath.Join(ws, rel))
		}, ErrOutside},
		{"hard link", func(t *testing.T, ws, rel, secret string) {
			if err := os.Link(secret, filepath.Join(ws, rel)); err != nil {
				t.Skip("no hard links here:", err)
			}
		}, ErrHardLink},
		{"FIFO", func(t *testing.T, ws, rel, _ string) {
			if err := syscall.Mkfifo(filepath.Join(ws, rel), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrNotRegular},
		{"directory", func(t *testing.T, ws, rel, _ string) {
			if err := os.Mkdir(filepath.Join(ws, rel), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ErrNotRegular},
		{"64 GB sparse file", func(t *testing.T, ws, rel, _ string) {
			f, err := os.Create(filepath.Join(ws, rel))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			if err := f.Truncate(64 << 30); err != nil {
				t.Skip("no sparse files here:", err)
			}
		}, ErrTooLarge},
		{"invalid UTF-8", func(t *testing.T, ws, rel, _ string) {
			if err := os.WriteFile(filepath.Join(ws, rel), []byte("ok \xff\xfe not text"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrNotText},
	}
}

// TestFilesRefuseHostileFiles tries every kind of bad file on every
// prompt file of DaemonFiles: each read is refused with its reason, never
// blocks, and never returns the secret.
func TestFilesRefuseHostileFiles(t *testing.T) {
	for _, d := range DaemonFiles {
		if !d.Text() {
			continue
		}
		rel := strings.ReplaceAll(d.Path, "*", "x")
		for _, h := range hostiles() {
			t.Run(rel+"/"+h.name, func(t *testing.T) {
				outside := t.TempDir()
				secret := filepath.Join(outside, "config.yaml")
				if err := os.WriteFile(secret, []byte("api_key: sk-SECRET"), 0o600); err != nil {
					t.Fatal(err)
				}
				ws := filepath.Join(outside, "workspace")
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o700); err != nil {
					t.Fatal(err)
				}
				h.plant(t, ws, rel, secret)
				core, logs := observer.New(zap.WarnLevel)
				f, err := OpenFiles(ws, zap.New(core))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				text, _, err := f.ReadText(rel, d.Max)
				if !errors.Is(err, h.want) {
					t.Fatalf("ReadText = %q, %v; want %v", text, err, h.want)
				}
				if strings.Contains(text, "SECRET") {
					t.Fatal("the secret was read")
				}
				f.Skip(rel, "prompt", err)
				f.Skip(rel, "prompt", err)
				if n := logs.Len(); n != 1 {
					t.Errorf("%d log lines for the same problem twice, want 1", n)
				}
				found := f.Inspect()
				if len(found) != 1 || found[0].Path != rel || found[0].Problem != Problem(err) {
					t.Errorf("Inspect = %+v, want one finding for %s: %s", found, rel, Problem(err))
				}
			})
		}
	}
}

func TestFilesWriteNeverThroughALink(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(outside, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "memory"), 0o700); err != nil {
		t.Fatal(err)
	}
	symlink(t, secret, filepath.Join(ws, MemoryFile))
	symlink(t, secret, filepath.Join(ws, HistoryFile))
	if err := syscall.Mkfifo(filepath.Join(ws, MemoryLock), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFiles(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.OpenAppend(HistoryFile, 0o600); !errors.Is(err, ErrOutside) {
		t.Errorf("OpenAppend through a link out: %v, want ErrOutside", err)
	}
	if _, err := f.Guard(MemoryFile); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Guard with a FIFO as the lock: %v, want ErrNotRegular", err)
	}
	// Replacing swaps the link for a file; the target keeps its bytes.
	if err := f.WriteFileAtomic(MemoryFile, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "keep" {
		t.Errorf("the link's target was written: %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(ws, MemoryFile)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("MEMORY.md after the replace: %v, %v", fi, err)
	}
	for _, rel := range []string{"../x", "/etc/passwd", "sessions/a.jsonl", "Sessions/a", ""} {
		if _, _, err := f.Open(rel); err == nil {
			t.Errorf("Open(%q) succeeded", rel)
		}
	}
}

func TestFilesMissingAndFine(t *testing.T) {
	ws := t.TempDir()
	f, err := OpenFiles(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if text, ok, err := f.ReadText("AGENTS.md", MaxPromptFileBytes); text != "" || ok || err != nil {
		t.Errorf("missing file: %q %v %v", text, ok, err)
	}
	if err := os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("héllo"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A link inside the workspace is followed.
	symlink(t, "AGENTS.md", filepath.Join(ws, "SOUL.md"))
	if text, ok, err := f.ReadText("SOUL.md", MaxPromptFileBytes); text != "héllo" || !ok || err != nil {
		t.Errorf("link inside: %q %v %v", text, ok, err)
	}
	if found := f.Inspect(); len(found) != 0 {
		t.Errorf("Inspect of a sound workspace: %+v", found)
	}
	if _, err := f.ReadFile("AGENTS.md", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the cap: %v", err)
	}
	if _, err := f.Stat("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a missing file: %v", err)
	}
}

// TestDaemonFilesTable keeps the table's rows well formed: each says what
// the daemon does, and every prompt file has a cap.
func TestDaemonFilesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range DaemonFiles {
		if seen[d.Path] {
			t.Errorf("%s listed twice", d.Path)
		}
		seen[d.Path] = true
		if d.Use == "" || len(d.Access) == 0 {
			t.Errorf("%s: no use or access", d.Path)
		}
		if d.Text() && d.Max <= 0 {
			t.Errorf("%s goes into a prompt without a cap", d.Path)
		}
	}
	for rel := range guarded {
		if !seen[rel] {
			t.Errorf("guarded file %s is not in DaemonFiles", rel)
		}
	}
}

// TestRootRefusesFIFO: the file tools' Root opens without blocking too, so
// read_file of a FIFO a command made is refused at once.
func TestRootRefusesFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, restrict := range []bool{true, false} {
		r, err := OpenRoot(ws, Options{Restrict: restrict})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Open("pipe"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("restrict=%v: Open of a FIFO: %v, want ErrNotRegular", restrict, err)
		}
		if _, err := r.ReadFile("pipe", 100); !errors.Is(err, ErrNotRegular) {
			t.Errorf("restrict=%v: ReadFile of a FIFO: %v", restrict, err)
		}
		r.Close()
	}
}
