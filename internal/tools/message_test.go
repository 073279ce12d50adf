package tools

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// fakePublisher records what the message tool publishes.
type fakePublisher struct {
	mu   sync.Mutex
	sent []bus.OutboundMessage
	err  error
}

func (p *fakePublisher) PublishOutbound(_ context.Context, m bus.OutboundMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.sent = append(p.sent, m)
	return nil
}

func (p *fakePublisher) take() []bus.OutboundMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sent
	p.sent = nil
	return s
}

func TestMessage(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{
		"pics/cat.png":      "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"docs/report.pdf":   "%PDF-1.4 ...",
		"docs/notes":        "plain text without an extension",
		"docs/photo.JPG":    "\xff\xd8\xff\xe0",
		"sub/dir/.keep":     "",
		"docs/readme.md":    "# hi",
		"pics/unknown.zzz9": "\x00\x01binary",
	})
	pub := &fakePublisher{}
	allow := func(channel, chatID string) bool { return channel == "discord" && chatID == "7" }
	tool := NewMessage(pub, allow, ws)
	meta := map[string]string{"thread_id": "99"}
	origin := Origin{Channel: "telegram", ChatID: "42", TurnID: "t1", Metadata: meta}

	cases := []struct {
		name    string
		origin  Origin
		args    args
		isError bool
		want    string
		sent    []bus.OutboundMessage
	}{
		{"current chat", origin, args{"content": "hello"}, false, "Message sent to the current chat.",
			[]bus.OutboundMessage{{Channel: "telegram", ChatID: "42", Kind: bus.KindMessage, Content: "hello", Metadata: meta}}},
		{"same chat named explicitly", origin, args{"content": "x", "channel": "telegram", "chat_id": "42"}, false, "current chat",
			[]bus.OutboundMessage{{Channel: "telegram", ChatID: "42", Kind: bus.KindMessage, Content: "x", Metadata: meta}}},
		{"media", origin, args{"content": "files", "media": []string{"pics/cat.png", "docs/report.pdf", "docs/notes", "docs/photo.JPG", "pics/unknown.zzz9"}},
			false, "Message sent to the current chat with 5 file(s).",
			[]bus.OutboundMessage{{Channel: "telegram", ChatID: "42", Kind: bus.KindMessage, Content: "files", Metadata: meta, Media: []llm.Part{
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: "pics/cat.png"}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "docs/report.pdf", MIME: "application/pdf", Size: 12, Name: "report.pdf"}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "docs/notes", MIME: "text/plain", Size: 31, Name: "notes"}},
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/jpeg", Path: "docs/photo.JPG"}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "pics/unknown.zzz9", MIME: "application/octet-stream", Size: 8, Name: "unknown.zzz9"}},
			}}}},
		{"media only", origin, args{"content": "", "media": []string{"pics/cat.png"}}, false, "with 1 file(s)",
			[]bus.OutboundMessage{{Channel: "telegram", ChatID: "42", Kind: bus.KindMessage, Metadata: meta, Media: []llm.Part{
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: "pics/cat.png"}}}}}},
		{"allowed other chat", origin, args{"content": "hi", "channel": "discord", "chat_id": 7}, false, "Message sent to discord:7.",
			[]bus.OutboundMessage{{Channel: "discord", ChatID: "7", Kind: bus.KindMessage, Content: "hi"}}},
		{"other chat refused", origin, args{"content": "hi", "chat_id": "666"}, true, "sending to telegram:666 is not allowed", nil},
		{"other channel without chat", origin, args{"content": "hi", "channel": "discord"}, true, "chat_id is required", nil},
		{"no current chat", Origin{}, args{"content": "hi"}, true, "there is no current chat", nil},
		{"empty", origin, args{"content": " "}, true, "nothing to send", nil},
		{"missing media", origin, args{"content": "x", "media": []string{"nope.png"}}, true, "no such file or directory: nope.png", nil},
		{"media directory", origin, args{"content": "x", "media": []string{"sub/dir"}}, true, "not a regular file", nil},
		{"media in sessions", origin, args{"content": "x", "media": []string{"sessions/telegram_42.jsonl"}}, true, "off limits", nil},
		{"media outside", origin, args{"content": "x", "media": []string{"/etc/hostname"}}, true, "path escapes the workspace", nil},
		{"too many media", origin, args{"content": "x", "media": make([]string, 11)}, true, "at most 10", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRegistry(RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
			if err := r.Register(tool); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(c.args)
			res := r.Execute(context.Background(), llm.ToolCall{ID: "c", Name: "message", Arguments: raw}, c.origin)
			check(t, res, c.isError, c.want)
			if got := pub.take(); !reflect.DeepEqual(got, c.sent) {
				t.Fatalf("published:\n%+v\nwant:\n%+v", got, c.sent)
			}
		})
	}

	pub.err = errors.New("bus closed")
	check(t, runTool(t, tool, args{"content": "x"}), true, "message not sent: bus closed")
}

func TestSentToCurrentChat(t *testing.T) {
	origin := Origin{Channel: "telegram", ChatID: "42"}
	ok := llm.ToolResult{}
	failed := llm.ToolResult{IsError: true}
	for _, c := range []struct {
		name string
		call llm.ToolCall
		res  llm.ToolResult
		want bool
	}{
		{"default target", llm.ToolCall{Name: "message", Arguments: json.RawMessage(`{"content":"x"}`)}, ok, true},
		{"explicit same chat", llm.ToolCall{Name: "message", Arguments: json.RawMessage(`{"content":"x","channel":"telegram","chat_id":42}`)}, ok, true},
		{"other chat", llm.ToolCall{Name: "message", Arguments: json.RawMessage(`{"content":"x","chat_id":"7"}`)}, ok, false},
		{"other channel", llm.ToolCall{Name: "message", Arguments: json.RawMessage(`{"content":"x","channel":"discord","chat_id":"42"}`)}, ok, false},
		{"failed", llm.ToolCall{Name: "message", Arguments: json.RawMessage(`{"content":"x"}`)}, failed, false},
		{"other tool", llm.ToolCall{Name: "exec", Arguments: json.RawMessage(`{}`)}, ok, false},
		{"unparsed", llm.ToolCall{Name: "message", ParseError: "bad"}, ok, false},
	} {
		if got := SentToCurrentChat(c.call, c.res, origin); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
