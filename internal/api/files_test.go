package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// Issue 28, finding 1: an inline image's declared type became the saved
// file's extension, so `data:image//../../../../config.yaml;base64,…`
// wrote anywhere the daemon may. These tests post crafted images through
// the real handler, agent and session store, and then read the whole test
// directory: a file may only appear as a session, or in inbox/ under a
// name of the daemon's own.

var (
	// pngBytes, jpegBytes, gifBytes and webpBytes start as those formats
	// do; http.DetectContentType needs no more.
	pngBytes  = mustB64("iVBORw0KGgoAAAANSUhEUg==")
	jpegBytes = []byte("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00")
	gifBytes  = []byte("GIF89a\x01\x00\x01\x00")
	webpBytes = []byte("RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00")
)

func mustB64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// daemonName is the only name a picture may have in inbox/.
var daemonName = regexp.MustCompile(`^img-\d{8}-\d{6}-[0-9a-f]{16}\.(png|jpg|gif|webp)$`)

// imageRequest is a chat request whose last message holds text and one
// image given by url; session "" makes it a one-off.
func imageRequest(t testing.TB, session, url string) string {
	t.Helper()
	req := map[string]any{"model": "nanobot", "messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "what is this?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}},
	}}}}
	if session != "" {
		req["user"] = session
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dataURL(meta string, data []byte) string {
	return "data:" + meta + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// tree lists every file and directory under the test's directory (the
// workspace's grandparent), by path relative to it.
func (h *harness) tree() map[string]bool {
	h.t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(h.top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.top, p)
		out[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// newFiles checks that what appeared under the test's directory since
// before is only sessions/, session files, inbox/ and daemon-named
// pictures in it, and returns those pictures (relative to the workspace).
func (h *harness) newFiles(before map[string]bool) []string {
	h.t.Helper()
	var pictures []string
	for p := range h.tree() {
		if before[p] {
			continue
		}
		rel, ok := strings.CutPrefix(p, "home/workspace/")
		switch {
		case !ok:
			h.t.Errorf("a file appeared outside the workspace: %s", p)
		case rel == "sessions" || rel == "inbox":
		case strings.HasPrefix(rel, "sessions/") && !strings.Contains(rel[len("sessions/"):], "/"):
		case strings.HasPrefix(rel, "inbox/") && daemonName.MatchString(rel[len("inbox/"):]):
			pictures = append(pictures, rel)
		default:
			h.t.Errorf("a file appeared that the daemon did not name: %s", rel)
		}
	}
	return pictures
}

func TestCraftedInlineImages(t *testing.T) {
	cases := []struct {
		name string
		meta string // between "data:" and ";base64,"
		data []byte
		// ext is the extension a kept picture gets; "" means refused (400).
		ext string
	}{
		{"the issue's traversal", "image//../../../../config.yaml", pngBytes, ".png"},
		{"dot dot", "image/../../escaped", pngBytes, ".png"},
		{"percent-encoded slashes", "image/..%2F..%2F..%2Fescaped", pngBytes, ".png"},
		{"absolute path", "image//tmp/nanobot-escaped", pngBytes, ".png"},
		{"backslashes", `image/..\..\..\escaped`, pngBytes, ".png"},
		{"NUL", "image/png\x00.sh", pngBytes, ".png"},
		{"very long", "image/" + strings.Repeat("a", 4096), pngBytes, ".png"},
		{"no type", "", gifBytes, ".gif"},
		{"JPEG declared as PNG", "image/png", jpegBytes, ".jpg"},
		{"WebP", "image/webp", webpBytes, ".webp"},
		{"wrong magic bytes", "image/png", []byte("#!/bin/sh\necho owned\n"), ""},
		{"SVG", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), ""},
		{"HTML declared as an image", "image/png", []byte("<!DOCTYPE html><script>alert(1)</script>"), ""},
		{"BMP", "image/bmp", []byte("BM\x1e\x00\x00\x00\x00\x00\x00\x00\x1a\x00\x00\x00"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "a picture"} }
			before := h.tree()
			code, body := h.raw(webuiToken, imageRequest(t, "ann", dataURL(tc.meta, tc.data)))
			pictures := h.newFiles(before)
			if tc.ext == "" {
				if code != 400 {
					t.Fatalf("status %d, want 400: %s", code, body)
				}
				e := parseError(t, body)
				if *e.Error.Type != "invalid_request_error" || !strings.Contains(*e.Error.Message, "not a PNG, JPEG, GIF or WebP") {
					t.Errorf("error = %s", body)
				}
				if len(pictures) != 0 || len(h.script.Requests()) != 0 {
					t.Errorf("a refused image was saved (%v) or reached the model", pictures)
				}
				return
			}
			if code != 200 {
				t.Fatalf("status %d: %s", code, body)
			}
			if len(pictures) != 1 || filepath.Ext(pictures[0]) != tc.ext {
				t.Fatalf("inbox got %v; want one daemon-named %s picture", pictures, tc.ext)
			}
			if saved, err := os.ReadFile(filepath.Join(h.ws, pictures[0])); err != nil || !bytes.Equal(saved, tc.data) {
				t.Errorf("saved %q, %v; want the image's bytes", saved, err)
			}
			if fi, err := os.Stat(filepath.Join(h.ws, pictures[0])); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("picture mode %v, %v; want 0600", fi.Mode(), err)
			}
			if m := h.script.Requests()[0].Messages[0]; m.Images != 1 {
				t.Errorf("the model got %d images, want 1", m.Images)
			}
		})
	}
}

// TestIssue28AttackWritesNothingOutsideTheInbox replays the attack as the
// report gives it, in a session and in a one-off turn: the file it aimed
// at keeps its bytes, and nothing but inbox/ and sessions/ changes.
func TestIssue28AttackWritesNothingOutsideTheInbox(t *testing.T) {
	payload := `#!/bin/sh` + "\n" + `mcp: {servers: {x: {command: /bin/sh}}}` + "\n"
	// The attack's own bytes are no picture: refused. A picture under the
	// same declared type is kept, under the daemon's name.
	for _, data := range [][]byte{[]byte(payload), append(bytes.Clone(pngBytes), payload...)} {
		for _, session := range []string{"ann", ""} {
			h := newHarness(t)
			h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
			target := filepath.Join(h.top, "config.yaml") // where ../../../../config.yaml from inbox/ leads
			if err := os.WriteFile(target, []byte("original"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := h.tree()
			code, body := h.raw(webuiToken, imageRequest(t, session, dataURL("image//../../../../config.yaml", data)))
			if code != 200 && code != 400 {
				t.Fatalf("status %d: %s", code, body)
			}
			if got, _ := os.ReadFile(target); string(got) != "original" {
				t.Fatalf("config.yaml outside the workspace was rewritten: %q", got)
			}
			pictures := h.newFiles(before)
			if session == "" && len(pictures) != 0 {
				t.Errorf("a one-off turn left %v", pictures)
			}
		}
	}
}

// TestOneOffTurnKeepsImagesInMemory: a one-off request's pictures reach the
// model and leave nothing on disk, neither in inbox/ nor in sessions/.
func TestOneOffTurnKeepsImagesInMemory(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "two pictures"})
	req := map[string]any{"model": "nanobot", "messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "compare"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", pngBytes)}},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/jpeg", jpegBytes)}},
	}}}}
	b, _ := json.Marshal(req)
	before := h.tree()
	if code, body := h.raw(webuiToken, string(b)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if m := h.script.Requests()[0].Messages[0]; m.Images != 2 {
		t.Errorf("the model got %d images, want 2", m.Images)
	}
	for p := range h.tree() {
		if !before[p] {
			t.Errorf("a one-off turn wrote %s", p)
		}
	}
}

// TestRequestLimits: history re-sent beyond its caps, and images beyond
// theirs, are refused with OpenAI's error shape before anything is kept.
func TestRequestLimits(t *testing.T) {
	h := newHarness(t, func(c *config.APIConfig) {
		c.MaxHistoryMessages, c.MaxHistoryBytes, c.MaxImages = 3, 100, 2
	})
	h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
	msgs := func(earlier ...string) []any {
		var out []any
		for i, s := range earlier {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			out = append(out, map[string]any{"role": role, "content": s})
		}
		return append(out, map[string]any{"role": "user", "content": "now"})
	}
	images := func(n int) []any {
		parts := []any{map[string]any{"type": "text", "text": "look"}}
		for range n {
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", pngBytes)}})
		}
		return []any{map[string]any{"role": "user", "content": parts}}
	}
	cases := []struct {
		name     string
		messages []any
		status   int
		param    string
		says     string
	}{
		{"history at the message cap", msgs("a", "b", "c"), 200, "", ""},
		{"history over the message cap", msgs("a", "b", "c", "d"), 400, "messages", "api.max_history_messages"},
		{"history at the byte cap", msgs(strings.Repeat("a", 50), strings.Repeat("b", 50)), 200, "", ""},
		{"history over the byte cap", msgs(strings.Repeat("a", 50), strings.Repeat("b", 51)), 400, "messages[1].content", "api.max_history_bytes"},
		{"images at the cap", images(2), 200, "", ""},
		{"images over the cap", images(3), 400, "messages[0].content", "api.max_images"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"model": "nanobot", "user": "u" + string(rune('a'+i)), "messages": tc.messages})
			sessions := len(h.sessionFiles())
			code, body := h.raw(webuiToken, string(b))
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			if tc.status == 200 {
				return
			}
			e := parseError(t, body)
			if *e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tc.param ||
				!strings.Contains(*e.Error.Message, tc.says) {
				t.Errorf("error = %s; want param %q and a message naming %s", body, tc.param, tc.says)
			}
			if n := len(h.sessionFiles()); n != sessions {
				t.Errorf("a refused request left a session")
			}
		})
	}
}

// FuzzContentParts posts an inline image whose declared type and bytes are
// the fuzzer's through the real handler: the answer is 200 or OpenAI's
// 400, and no file ever appears but a session or a daemon-named picture in
// inbox/ holding exactly the bytes sent.
func FuzzContentParts(f *testing.F) {
	for _, seed := range []struct {
		meta string
		data []byte
	}{
		{"image//../../../../config.yaml", pngBytes},
		{"image//../../../../config.yaml", []byte("mcp: {}")},
		{"image/..%2F..%2Fx", jpegBytes},
		{"image//etc/passwd", gifBytes},
		{"image/png\x00", webpBytes},
		{"image/svg+xml", []byte("<svg/>")},
		{"text/html", []byte("<html>")},
		{"image/" + strings.Repeat("z", 300), pngBytes},
	} {
		f.Add(seed.meta, seed.data)
	}
	f.Fuzz(func(t *testing.T, meta string, data []byte) {
		h := newHarness(t)
		h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
		before := h.tree()
		code, body := h.raw(webuiToken, imageRequest(t, "fuzz", dataURL(meta, data)))
		if code != 200 && code != 400 {
			t.Fatalf("status %d: %s", code, body)
		}
		if code == 400 {
			parseError(t, body)
		}
		pictures := h.newFiles(before)
		if code == 400 && len(pictures) > 0 {
			t.Errorf("a refused request saved %v", pictures)
		}
		for _, p := range pictures {
			if saved, err := os.ReadFile(filepath.Join(h.ws, p)); err != nil || !bytes.Equal(saved, data) {
				t.Errorf("%s holds %q, %v; want the bytes sent", p, saved, err)
			}
		}
	})
}
