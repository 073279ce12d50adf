package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// Inline images reach the agent from every channel; what a sender declared
// about them (the MIME type) must never name a file (issue 28). The agent
// keeps a picture by its bytes, under a name of its own, and a one-off turn
// keeps it in memory only.
func TestInboundImagesAreKeptByTheirBytes(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	daemonName := regexp.MustCompile(`^inbox/img-\d{8}-\d{6}-[0-9a-f]{16}\.png$`)
	cases := []struct {
		name      string
		img       llm.Image
		ephemeral bool
		// saved: a daemon-named file holds the bytes; else the inbox stays empty.
		saved  bool
		images int    // images the model gets
		note   string // what the model's text says when the image is dropped
	}{
		{"a traversal as the declared type", llm.Image{MIME: "image//../../../escaped", Data: png}, false, true, 1, ""},
		{"HTML declared as PNG", llm.Image{MIME: "image/png", Data: []byte("<html><script>x</script>")}, false, false, 0, "not a PNG, JPEG, GIF or WebP"},
		{"a one-off turn", llm.Image{MIME: "image/png", Data: png}, true, false, 1, ""},
		{"a one-off turn with no picture", llm.Image{MIME: "image/png", Data: []byte("#!/bin/sh")}, true, false, 0, "not a PNG, JPEG, GIF or WebP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.script.Push(fakellm.Reply{Text: "seen"})
			img := tc.img
			m := bus.InboundMessage{Channel: "test", ChatID: "c1", SenderID: "u1", MessageID: "m1", Content: "look",
				Media: []llm.Part{{Kind: llm.PartImage, Image: &img}}, Ephemeral: tc.ephemeral}
			if tc.ephemeral {
				m.SessionKey = "test:~once"
			}
			if err := h.bus.PublishInbound(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			h.waitFinals("c1", 1)
			req := h.script.Requests()[0]
			last := req.Messages[len(req.Messages)-1]
			if last.Images != tc.images || !strings.Contains(last.Text, tc.note) {
				t.Errorf("the model got %d images and %q; want %d and a note %q", last.Images, last.Text, tc.images, tc.note)
			}
			entries, _ := os.ReadDir(filepath.Join(h.ws, "inbox"))
			if escaped, _ := filepath.Glob(filepath.Join(filepath.Dir(h.ws), "*escaped*")); len(escaped) > 0 {
				t.Errorf("a file was written outside the workspace: %v", escaped)
			}
			if !tc.saved {
				if len(entries) != 0 {
					t.Errorf("inbox holds %d files; want none", len(entries))
				}
				if tc.ephemeral {
					if files, _ := filepath.Glob(filepath.Join(h.ws, "sessions", "*")); len(files) != 0 {
						t.Errorf("a one-off turn left sessions: %v", files)
					}
				}
				return
			}
			if len(entries) != 1 {
				t.Fatalf("inbox holds %d files, want 1", len(entries))
			}
			rel := "inbox/" + entries[0].Name()
			if !daemonName.MatchString(rel) {
				t.Errorf("saved as %s; want a daemon-chosen name", rel)
			}
			if b, _ := os.ReadFile(filepath.Join(h.ws, rel)); !bytes.Equal(b, png) {
				t.Errorf("saved bytes %q", b)
			}
			snap, err := h.store.Get("test:c1")
			if err != nil {
				t.Fatal(err)
			}
			var stored *llm.Image
			for _, p := range snap.Messages[0].Parts {
				if p.Kind == llm.PartImage {
					stored = p.Image
				}
			}
			if stored == nil || stored.Path != rel || stored.MIME != "image/png" || len(stored.Data) != 0 {
				t.Errorf("the session holds %+v; want the path and the sniffed type", stored)
			}
		})
	}
}
