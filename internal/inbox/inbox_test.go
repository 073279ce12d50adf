package inbox

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSafeName(t *testing.T) {
	tests := map[string]string{
		"report.pdf":                      "report.pdf",
		"../../etc/passwd":                "passwd",
		`..\..\boot.ini`:                  "boot.ini",
		"my file (1).txt":                 "my_file__1_.txt",
		".hidden":                         "hidden",
		"":                                "file",
		"日本.txt":                          "__.txt",
		strings.Repeat("a", 300) + ".png": strings.Repeat("a", 96) + ".png",
	}
	for in, want := range tests {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A saved file lands under inbox/, and a second save of the same name or a
// symlinked inbox pointing out of the workspace is refused, never followed.
func TestSave(t *testing.T) {
	ws := t.TempDir()
	rel, err := Save(ws, "web-1-a.txt", []byte("hello"))
	if err != nil || rel != "inbox/web-1-a.txt" {
		t.Fatalf("Save = %q, %v", rel, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != "hello" {
		t.Fatalf("saved %q, %v", b, err)
	}
	if _, err := Save(ws, "web-1-a.txt", []byte("again")); err == nil {
		t.Error("a second save of the same name overwrote the first")
	}

	outside, ws2 := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws2, Dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(ws2, "x.txt", []byte("escape")); err == nil {
		t.Error("saved through a symlink out of the workspace")
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Error("the file was written outside the workspace")
	}
}

// Save takes only plain names: anything a caller forgot to clean is
// refused before the disk is touched, so no name can climb out of inbox/.
func TestSaveRefusesNamesThatAreNotPlain(t *testing.T) {
	for _, name := range []string{
		"", "../x", "a/b", `a\b`, "/etc/passwd", ".hidden", "..", "x\x00y", "a%2Fb",
		strings.Repeat("a", maxNameBytes+1),
	} {
		ws := t.TempDir()
		if rel, err := Save(ws, name, []byte("x")); err == nil {
			t.Errorf("Save(%q) = %q; want it refused", name, rel)
		}
		if _, err := os.Stat(filepath.Join(ws, Dir)); err == nil {
			t.Errorf("Save(%q) touched the disk", name)
		}
	}
	if _, err := Save(t.TempDir(), strings.Repeat("a", maxNameBytes), []byte("x")); err != nil {
		t.Errorf("a plain name of %d bytes: %v", maxNameBytes, err)
	}
}

func TestSaveImageNamesByContent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name, mime, ext string
		data            []byte
	}{
		{"png", "image/png", ".png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")},
		{"jpeg", "image/jpeg", ".jpg", []byte("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00")},
		{"gif", "image/gif", ".gif", []byte("GIF87a\x01\x00\x01\x00")},
		{"webp", "image/webp", ".webp", []byte("RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00")},
		{"svg", "", "", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
		{"html", "", "", []byte("<html><script>alert(1)</script>")},
		{"text", "", "", []byte("mcp: {}")},
		{"empty", "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			rel, mime, err := SaveImage(ws, tc.data, now)
			if tc.mime == "" {
				if !errors.Is(err, ErrNotImage) {
					t.Fatalf("SaveImage = %q, %v; want ErrNotImage", rel, err)
				}
				if _, err := os.Stat(filepath.Join(ws, Dir)); err == nil {
					t.Error("a refused picture touched the disk")
				}
				return
			}
			if err != nil || mime != tc.mime {
				t.Fatalf("SaveImage = %q, %q, %v", rel, mime, err)
			}
			if !strings.HasPrefix(rel, "inbox/img-20260102-030405-") || path.Ext(rel) != tc.ext {
				t.Errorf("name %q; want inbox/img-20260102-030405-<random>%s", rel, tc.ext)
			}
			fi, err := os.Stat(filepath.Join(ws, rel))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
			}
			if again, _, err := SaveImage(ws, tc.data, now); err != nil || again == rel {
				t.Errorf("a second picture in the same second: %q, %v", again, err)
			}
		})
	}
}

// ReadFile reads a path a session holds inside the workspace only.
func TestReadFileStaysInTheWorkspace(t *testing.T) {
	top := t.TempDir()
	ws := filepath.Join(top, "ws")
	if err := os.MkdirAll(filepath.Join(ws, Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(top, "secret"), filepath.Join(ws, Dir, "link.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, Dir, "a.png"), []byte("picture"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ws, "inbox/a.png", 100); err != nil || string(b) != "picture" {
		t.Errorf("ReadFile(inbox/a.png) = %q, %v", b, err)
	}
	if _, err := ReadFile(ws, "inbox/a.png", 3); err == nil {
		t.Error("a file over the limit was read")
	}
	for _, rel := range []string{"../secret", filepath.Join(top, "secret"), "inbox/link.png", "inbox"} {
		if b, err := ReadFile(ws, rel, 100); err == nil {
			t.Errorf("ReadFile(%q) = %q; want it refused", rel, b)
		}
	}
}

// TestInboxRefusesHostileFiles: inbox/ as a link out of the workspace or a
// FIFO takes no file; a saved picture replaced by a link to a secret, a
// FIFO or a 64 GB file is not read back for the model (at once, never
// waiting on the FIFO).
func TestInboxRefusesHostileFiles(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "config.yaml")
	if err := os.WriteFile(secret, []byte("sk-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("inbox/ is a link out", func(t *testing.T) {
		ws := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(ws, Dir)); err != nil {
			t.Fatal(err)
		}
		if _, err := Save(ws, "a.txt", []byte("x")); err == nil {
			t.Error("saved through a link out of the workspace")
		}
		if _, err := os.Stat(filepath.Join(outside, "a.txt")); err == nil {
			t.Error("a file landed outside the workspace")
		}
	})
	t.Run("inbox/ is a FIFO", func(t *testing.T) {
		ws := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(ws, Dir), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Save(ws, "a.txt", []byte("x")); err == nil {
			t.Error("saved into a FIFO")
		}
	})
	for name, plant := range map[string]func(t *testing.T, full string){
		"link out": func(t *testing.T, full string) {
			if err := os.Symlink(secret, full); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO": func(t *testing.T, full string) {
			if err := syscall.Mkfifo(full, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"64 GB": func(t *testing.T, full string) {
			if err := os.WriteFile(full, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(full, 64<<30); err != nil {
				t.Skip("no sparse files:", err)
			}
		},
	} {
		t.Run("read back: "+name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, Dir), 0o700); err != nil {
				t.Fatal(err)
			}
			plant(t, filepath.Join(ws, Dir, "img.png"))
			if data, err := ReadFile(ws, "inbox/img.png", 10<<20); err == nil || len(data) > 0 {
				t.Errorf("ReadFile = %d bytes, %v; want it refused", len(data), err)
			}
		})
	}
}
