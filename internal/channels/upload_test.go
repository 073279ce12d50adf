package channels

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// UploadOf is the one place every adapter reads what a reply attaches:
// what a model may send out of the workspace, and what it may not.
func TestUploadOfReadsOnlyTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(outside, "the config's keys")
	write(filepath.Join(ws, "notes.txt"), "notes")
	write(filepath.Join(ws, "pic.png"), "png bytes")
	write(filepath.Join(ws, "big.bin"), strings.Repeat("x", 2048))
	write(filepath.Join(ws, "sessions", "telegram_1.jsonl"), "{}")
	if err := os.Symlink(outside, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := func(p string) llm.Part { return llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{Path: p}} }
	tests := []struct {
		name string
		part llm.Part
		ok   bool
		want string // the upload's name and data "name=data", or the error's words
	}{
		{"an inline image", llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: []byte("px")}}, true, "image-1.png=px"},
		{"an image in the workspace", llm.Part{Kind: llm.PartImage, Image: &llm.Image{Path: "pic.png"}}, true, "pic.png=png bytes"},
		{"a file", file("notes.txt"), true, "notes.txt=notes"},
		{"a file by its absolute path inside", file(filepath.Join(ws, "notes.txt")), true, "notes.txt=notes"},
		{"a path out", file("../" + filepath.Base(filepath.Dir(outside)) + "/secret.txt"), true, "not allowed"},
		{"an absolute path out", file(outside), true, "not allowed"},
		{"a session", file("sessions/telegram_1.jsonl"), true, "not allowed"},
		{"a link out", file("link.txt"), true, "link.txt"},
		{"a FIFO", file("fifo"), true, "fifo"},
		{"over the limit", file("big.bin"), true, "upload limit"},
		{"missing", file("nope.txt"), true, "no such file"},
		{"an image known by its URL", llm.Part{Kind: llm.PartImage, Image: &llm.Image{URL: "https://example.com/a.png"}}, false, ""},
		{"text", llm.Part{Kind: llm.PartText, Text: "hi"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok, err := UploadOf(tt.part, 0, ws, 1024)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			got := ""
			switch {
			case err != nil:
				got = err.Error()
				if strings.Contains(got, "the config's keys") {
					t.Fatalf("the error carries the file's content: %v", err)
				}
			case ok:
				got = u.Name + "=" + string(u.Data)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if err != nil && strings.Contains(tt.want, "=") {
				t.Errorf("unexpected error: %v", err)
			}
			if err == nil && ok && !strings.Contains(tt.want, "=") {
				t.Errorf("read %q, want a refusal (%s)", got, tt.want)
			}
		})
	}
}
