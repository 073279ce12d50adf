package inbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
