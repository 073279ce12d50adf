package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// messageCall is an assistant message calling the message tool with args,
// and the tool's result (an error when failed).
func messageCall(id, args string, failed bool) []llm.Message {
	call := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
		Call: &llm.ToolCall{ID: id, Name: "message", Arguments: json.RawMessage(args)}}}}
	res := llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult,
		Result: &llm.ToolResult{ToolCallID: id, Name: "message", IsError: failed, Content: llm.PlainContent("ok")}}}}
	return []llm.Message{call, res}
}

func (e *env) writeWS(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// notesOf returns the hello's assistant messages: their HTML and file URLs
// (or "name!" for a file without one).
func notesOf(h map[string]any) (htmls []string, files []string) {
	for _, m := range h["messages"].([]any) {
		mm := m.(map[string]any)
		if mm["role"] != "assistant" {
			continue
		}
		html, _ := mm["html"].(string)
		htmls = append(htmls, strings.TrimSpace(html))
		sent, _ := mm["sent"].([]any)
		for _, f := range sent {
			ff := f.(map[string]any)
			u, _ := ff["url"].(string)
			if u == "" {
				u = ff["name"].(string) + "!"
			}
			files = append(files, u)
		}
	}
	return htmls, files
}

// What the message tool sent is part of the chat's record: a page opened
// after the turn (a reload, or a page that was closed when a reminder ran)
// shows every note it sent to this conversation, with its files, and none
// it sent elsewhere or failed to send
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestHelloRebuildsMessageToolNotesFromTheRecord(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	var msgs []llm.Message
	msgs = append(msgs, llm.NewText(llm.RoleUser, "make me a report"))
	msgs = append(msgs, messageCall("c1", `{"content":"Working on it…"}`, false)...)
	msgs = append(msgs, messageCall("c2", `{"content":"Here it is.","media":["out/report.txt","chart.png","/etc/passwd"]}`, false)...)
	msgs = append(msgs, messageCall("c3", `{"content":"to telegram","channel":"telegram","chat_id":"42"}`, false)...)
	msgs = append(msgs, messageCall("c4", `{"content":"never sent","media":["../x"]}`, true)...)
	msgs = append(msgs, llm.NewText(llm.RoleAssistant, "Done."))
	if _, err := e.store.Append(key(id), msgs...); err != nil {
		t.Fatal(err)
	}
	frames, stop := c.stream(id)
	defer stop()
	htmls, files := notesOf(next(t, frames))
	got := strings.Join(htmls, "|")
	for _, want := range []string{"Working on it…", "Here it is.", "Done."} {
		if !strings.Contains(got, want) {
			t.Errorf("hello assistant messages %q lack %q", got, want)
		}
	}
	for _, not := range []string{"to telegram", "never sent"} {
		if strings.Contains(got, not) {
			t.Errorf("hello shows %q, which was not sent to this conversation", not)
		}
	}
	want := []string{"/api/chats/" + id + "/files?path=out%2Freport.txt", "/api/chats/" + id + "/files?path=chart.png", "passwd!"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("files = %q, want %q", files, want)
	}
}

// A note sent while the turn still runs (not stored yet) is in the hello of
// a page that connects meanwhile, files included, and a live note carries
// its files in its event.
func TestLiveNoteAndItsFiles(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	e.writeWS("out/a.txt", "hello file")
	frames, stop := c.stream(id)
	defer stop()
	next(t, frames)
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindStart, TurnID: "t1"})
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindMessage, Content: "the file",
		Media: []llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "out/a.txt", Name: "a.txt"}}}})
	next(t, frames)
	ev := next(t, frames)
	files, _ := ev["files"].([]any)
	if ev["type"] != "message" || len(files) != 1 {
		t.Fatalf("message event = %v, want one file", ev)
	}
	link := files[0].(map[string]any)["url"].(string)
	frames2, stop2 := c.stream(id)
	defer stop2()
	htmls, urls := notesOf(next(t, frames2))
	if len(htmls) != 1 || !strings.Contains(htmls[0], "the file") || len(urls) != 1 || urls[0] != link {
		t.Fatalf("mid-turn hello notes %q files %q, want the note and %s", htmls, urls, link)
	}
	resp := e.do(c, "GET", link, nil)
	if resp.StatusCode != http.StatusOK || body(resp) != "hello file" {
		t.Fatalf("GET %s: %d", link, resp.StatusCode)
	}
}

// The file endpoint serves only files sent to the conversation, only from
// the workspace (os.Root: no "..", no symlink out, never sessions/), only
// behind the login, and never as a page of the origin.
func TestSentFilesServedOnlyFromTheWorkspace(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	other := c.newChat()
	e.writeWS("out/report.txt", "the report")
	e.writeWS("pic.png", string(tinyPNGForWeb))
	e.writeWS("secret.txt", "not sent")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	msgs := messageCall("c1", `{"content":"files","media":["out/report.txt","./pic.png","link.txt","sessions/web_x.jsonl"]}`, false)
	if _, err := e.store.Append(key(id), msgs...); err != nil {
		t.Fatal(err)
	}
	get := func(c *client, chat, p string) *http.Response {
		return e.do(c, "GET", "/api/chats/"+chat+"/files?path="+url.QueryEscape(p), nil)
	}
	tests := []struct {
		name   string
		c      *client
		chat   string
		path   string
		status int
		disp   string
	}{
		{"a sent file, as a download", c, id, "out/report.txt", http.StatusOK, "attachment"},
		{"a sent picture, shown", c, id, "pic.png", http.StatusOK, "inline"},
		{"not logged in", nil, id, "out/report.txt", http.StatusUnauthorized, ""},
		{"another conversation", c, other, "out/report.txt", http.StatusNotFound, ""},
		{"a file never sent", c, id, "secret.txt", http.StatusNotFound, ""},
		{"out of the workspace by ..", c, id, "../outside.txt", http.StatusNotFound, ""},
		{"an absolute path", c, id, outside, http.StatusNotFound, ""},
		{"a symlink out of the workspace", c, id, "link.txt", http.StatusNotFound, ""},
		{"sessions", c, id, "sessions/web_x.jsonl", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			//lint:ignore bodyclose get is e.do, which closes the body when the test ends
			resp := get(tt.c, tt.chat, tt.path)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body(resp))
			}
			if tt.status != http.StatusOK {
				return
			}
			h := resp.Header
			if !strings.HasPrefix(h.Get("Content-Disposition"), tt.disp) || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") ||
				h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers %v: want %s, a sandbox CSP and nosniff", h, tt.disp)
			}
		})
	}
}

var tinyPNGForWeb = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// The login answers what GET /api/session answers, the panel flag
// included: the page shows its Control panel button right after a fresh
// login, not only after a reload.
func TestLoginAnswerMatchesSession(t *testing.T) {
	for _, withPanel := range []bool{false, true} {
		e := newEnv(t, func(_ *config.WebChannelConfig, d *Deps) {
			if withPanel {
				d.Panel = &Panel{Version: "v-test"}
			}
		})
		resp := e.do(nil, "POST", "/api/login", map[string]string{"token": testToken})
		var login map[string]any
		decode(t, resp, &login)
		var cookie *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == cookieName {
				cookie = ck
			}
		}
		c := &client{e: e, cookie: cookie, csrf: login["csrf"].(string)}
		var session map[string]any
		decode(t, e.do(c, "GET", "/api/session", nil), &session)
		if login["panel"] != withPanel || session["panel"] != withPanel || login["csrf"] != session["csrf"] {
			t.Errorf("panel %v: login answered %v, session %v", withPanel, login, session)
		}
	}
}

// TestSentFileRefusesHostileFiles: a sent file replaced by a FIFO, a
// device or a 64 GB file is not served (at once: no open waits on the
// FIFO), like a link out of the workspace.
func TestSentFileRefusesHostileFiles(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	if err := os.MkdirAll(filepath.Join(e.ws, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.ws, "out", "fifo.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(e.ws, "out", "zero.txt")); err != nil {
		t.Fatal(err)
	}
	e.writeWS("out/huge.txt", "")
	if err := os.Truncate(filepath.Join(e.ws, "out", "huge.txt"), 64<<30); err != nil {
		t.Skip("no sparse files:", err)
	}
	msgs := messageCall("c1", `{"content":"files","media":["out/fifo.txt","out/zero.txt","out/huge.txt"]}`, false)
	if _, err := e.store.Append(key(id), msgs...); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out/fifo.txt", "out/zero.txt", "out/huge.txt"} {
		resp := e.do(c, "GET", "/api/chats/"+id+"/files?path="+url.QueryEscape(p), nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
		}
		resp.Body.Close()
	}
}
