package telegramfake

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
)

func TestParseHTML(t *testing.T) {
	tests := []struct {
		in, visible, err string
	}{
		{"<b>bold</b> &amp; <i>it</i>", "bold & it", ""},
		{`<a href="https://x.y/?a=1&amp;b=2">l</a>`, "l", ""},
		{`<pre><code class="language-go">x &lt; y</code></pre>`, "x < y", ""},
		{`<span class="tg-spoiler">s</span><blockquote expandable>q</blockquote>`, "sq", ""},
		{"&#128512;&#x1F600;", "😀😀", ""},
		{"<b>open", "", `Can't find end tag corresponding to start tag "b"`},
		{"<b><i>x</b></i>", "", "Unmatched end tag"},
		{"<div>x</div>", "", `Unsupported start tag "div"`},
		{"a < b", "", "Unclosed start tag"},
		{"a < b > c", "", "Unsupported start tag"},
		{"fish & chips", "", "must be escaped"},
		{"&nbsp;", "", "Unsupported HTML entity"},
		{"<code><b>x</b></code>", "", "inside"},
		{"<a>x</a>", "", "href"},
		{"<blockquote><blockquote>x</blockquote></blockquote>", "", "Nested"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHTML(tt.in)
			if tt.err == "" {
				if err != nil || got != tt.visible {
					t.Fatalf("ParseHTML = %q, %v; want %q", got, err, tt.visible)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseHTML error = %v, want %q", err, tt.err)
			}
		})
	}
}

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

func call(t *testing.T, s *Server, method string, params map[string]any) answer {
	t.Helper()
	body, _ := json.Marshal(params)
	resp, err := http.Post(s.URL()+"/bot"+Token+"/"+method, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGetUpdatesOffsetAndTimeout(t *testing.T) {
	s := New(t)
	id1 := s.PushMessage(models.Message{Chat: models.Chat{ID: 1}, Text: "a"})
	id2 := s.PushMessage(models.Message{Chat: models.Chat{ID: 1}, Text: "b"})
	var ups []models.Update
	_ = json.Unmarshal(call(t, s, "getUpdates", map[string]any{"offset": 0}).Result, &ups)
	if len(ups) != 2 || ups[0].ID != id1 {
		t.Fatalf("updates = %+v", ups)
	}
	_ = json.Unmarshal(call(t, s, "getUpdates", map[string]any{"offset": id2}).Result, &ups)
	if len(ups) != 1 || ups[0].ID != id2 || s.Confirmed() != id2 {
		t.Fatalf("offset %d: %+v, confirmed %d", id2, ups, s.Confirmed())
	}
	// A long poll returns as soon as an update arrives.
	done := make(chan []models.Update)
	go func() {
		var got []models.Update
		_ = json.Unmarshal(call(t, s, "getUpdates", map[string]any{"offset": id2 + 1, "timeout": 10}).Result, &got)
		done <- got
	}()
	s.WaitCalls(t, "getUpdates", 2) // the long poll is parked (only finished calls are recorded)
	s.PushMessage(models.Message{Chat: models.Chat{ID: 1}, Text: "c"})
	select {
	case got := <-done:
		if len(got) != 1 || got[0].Message.Text != "c" {
			t.Fatalf("long poll got %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not wake up")
	}
}

// Like Telegram, the fake sends only the kinds of update asked for.
func TestGetUpdatesHonoursAllowedUpdates(t *testing.T) {
	s := New(t)
	s.PushMessage(models.Message{ID: 1, Chat: models.Chat{ID: 1}, Text: "a"})
	edit := s.PushEdit(models.Message{ID: 1, Chat: models.Chat{ID: 1}, Text: "a, edited"})
	var ups []models.Update
	_ = json.Unmarshal(call(t, s, "getUpdates", map[string]any{"offset": 0, "allowed_updates": []string{"message"}}).Result, &ups)
	if len(ups) != 1 || ups[0].Message == nil {
		t.Fatalf("messages only: %+v", ups)
	}
	_ = json.Unmarshal(call(t, s, "getUpdates", map[string]any{"offset": 0, "allowed_updates": []string{"message", "edited_message"}}).Result, &ups)
	if len(ups) != 2 || ups[1].ID != edit || ups[1].EditedMessage == nil || ups[1].EditedMessage.EditDate == 0 {
		t.Fatalf("with edits: %+v", ups)
	}
}

func TestSendEditDeleteAndErrors(t *testing.T) {
	s := New(t)
	a := call(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "<b>hi</b>", "parse_mode": "HTML"})
	var m models.Message
	_ = json.Unmarshal(a.Result, &m)
	if !a.OK || s.Visible(5)[0] != "hi" {
		t.Fatalf("send: %+v, visible %q", a, s.Visible(5))
	}
	if a := call(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "<x>", "parse_mode": "HTML"}); a.ErrorCode != 400 ||
		!strings.HasPrefix(a.Description, "Bad Request: can't parse entities: ") {
		t.Fatalf("bad HTML: %+v", a)
	}
	if a := call(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": strings.Repeat("😀", 2049)}); a.Description != "Bad Request: message is too long" {
		t.Fatalf("4098 UTF-16 units: %+v", a)
	}
	if a := call(t, s, "editMessageText", map[string]any{"chat_id": 5, "message_id": m.ID, "text": "<b>hi</b>", "parse_mode": "HTML"}); !strings.Contains(a.Description, "message is not modified") {
		t.Fatalf("same text: %+v", a)
	}
	if a := call(t, s, "editMessageText", map[string]any{"chat_id": 5, "message_id": m.ID, "text": "bye"}); !a.OK || s.Visible(5)[0] != "bye" {
		t.Fatalf("edit: %+v", a)
	}
	if a := call(t, s, "deleteMessage", map[string]any{"chat_id": 5, "message_id": m.ID}); !a.OK || len(s.Visible(5)) != 0 {
		t.Fatalf("delete: %+v", a)
	}
	s.Inject("sendMessage", Fault{Kind: RateLimit, RetryAfter: 4, Times: 2})
	for range 2 {
		if a := call(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "x"}); a.ErrorCode != 429 || a.Parameters.RetryAfter != 4 {
			t.Fatalf("injected 429: %+v", a)
		}
	}
	if a := call(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "x"}); !a.OK {
		t.Fatalf("after the fault: %+v", a)
	}
	s.Inject("getUpdates", Fault{Kind: Conflict})
	if a := call(t, s, "getUpdates", nil); a.ErrorCode != 409 {
		t.Fatalf("conflict: %+v", a)
	}
	s.Inject("getMe", Fault{Kind: Stall})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/bot"+Token+"/getMe", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a stalled call answered")
	}
	resp, _ := http.Post(s.URL()+"/botWRONG/getMe", "application/json", nil)
	if resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestFiles(t *testing.T) {
	s := New(t)
	id := s.AddFile("docs/a.txt", []byte("content"))
	var f models.File
	_ = json.Unmarshal(call(t, s, "getFile", map[string]any{"file_id": id}).Result, &f)
	resp, err := http.Get(s.URL() + "/file/bot" + Token + "/" + f.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if b.String() != "content" {
		t.Fatalf("download = %q", b.String())
	}
}

func TestStreamHandsCallsOverInsteadOfKeepingThem(t *testing.T) {
	s := New(t)
	got := make(chan Call, 4)
	s.Stream(func(c Call) { got <- c })
	call(t, s, "sendMessage", map[string]any{"chat_id": 7, "text": "hi"})
	call(t, s, "sendMessage", map[string]any{"chat_id": 7, "text": ""})
	for _, want := range []struct {
		status int
		text   string
	}{{200, "hi"}, {400, ""}} {
		c := <-got
		if c.Method != "sendMessage" || c.Status != want.status || c.Params["text"] != want.text || c.At.IsZero() {
			t.Errorf("streamed call = %+v, want sendMessage %d %q with a time", c, want.status, want.text)
		}
	}
	if n := len(s.Calls()); n != 0 {
		t.Errorf("Calls() kept %d calls while streaming", n)
	}
	if v := s.Visible(7); len(v) != 1 || v[0] != "hi" {
		t.Errorf("Visible = %q: messages are still kept", v)
	}
}
