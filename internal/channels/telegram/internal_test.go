package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
)

type nopBus struct{}

func (nopBus) PublishInbound(context.Context, bus.InboundMessage) error   { return nil }
func (nopBus) PublishOutbound(context.Context, bus.OutboundMessage) error { return nil }

func TestMapError(t *testing.T) {
	var rl *channels.RateLimitError
	var uo *channels.UnknownOutcomeError
	var pe *channels.PermanentError
	tests := []struct {
		name string
		err  error
		is   func(error) bool
	}{
		{"429", &bot.TooManyRequestsError{Message: "too many requests", RetryAfter: 7},
			func(e error) bool { return errors.As(e, &rl) && rl.RetryAfter == 7*time.Second }},
		{"bad entities", fmt.Errorf("%w, %s", bot.ErrorBadRequest, "Bad Request: can't parse entities: Unsupported start tag"),
			func(e error) bool { return errors.Is(e, channels.ErrBadMarkup) }},
		{"not modified", fmt.Errorf("%w, %s", bot.ErrorBadRequest, "Bad Request: message is not modified: specified new message content"),
			func(e error) bool { return errors.Is(e, channels.ErrNotModified) }},
		{"other bad request", fmt.Errorf("%w, %s", bot.ErrorBadRequest, "Bad Request: chat not found"),
			func(e error) bool { return errors.As(e, &pe) }},
		{"forbidden", fmt.Errorf("%w, %s", bot.ErrorForbidden, "Forbidden: bot was blocked by the user"),
			func(e error) bool { return errors.As(e, &pe) }},
		{"migrated", &bot.MigrateError{Message: "migrated", MigrateToChatID: -100},
			func(e error) bool { return errors.As(e, &pe) }},
		{"after write", fmt.Errorf("error do request for method sendMessage, %w", &errAfterWrite{io.ErrUnexpectedEOF}),
			func(e error) bool { return errors.As(e, &uo) }},
		{"5xx", errors.New("error response from telegram for method sendMessage, 502 Bad Gateway"),
			func(e error) bool { return !errors.As(e, &pe) && !errors.As(e, &uo) && !errors.As(e, &rl) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mapError("op", tt.err); !tt.is(got) {
				t.Fatalf("mapError(%v) = %#v", tt.err, got)
			}
		})
	}
	if mapError("op", nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

// TestTraceClientTellsWrittenFromNot checks the distinction that keeps a
// send from being repeated: a connection dropped after the request was
// written is an unknown outcome; a refused connection is not.
func TestTraceClientTellsWrittenFromNot(t *testing.T) {
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer drop.Close()
	tc := traceClient{&http.Client{}}
	req, _ := http.NewRequest(http.MethodPost, drop.URL, strings.NewReader("text=hi"))
	_, err := tc.Do(req)
	var aw *errAfterWrite
	if !errors.As(err, &aw) {
		t.Fatalf("dropped after write: %v, want errAfterWrite", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr, strings.NewReader("text=hi"))
	if _, err := tc.Do(req); err == nil || errors.As(err, &aw) {
		t.Fatalf("refused connection: %v, want a plain (retryable) error", err)
	}
}

func upd(id int64, text string) json.RawMessage {
	raw, _ := json.Marshal(models.Update{ID: id, Message: &models.Message{ID: int(id), Text: text, Chat: models.Chat{ID: 1}}})
	return raw
}

func TestJournalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path)
	fresh, err := j.received([]json.RawMessage{upd(10, "a"), upd(11, "b"), upd(12, "c")}, true)
	if err != nil || len(fresh) != 3 {
		t.Fatalf("received = %d, %v", len(fresh), err)
	}
	if again, _ := j.received([]json.RawMessage{upd(11, "b"), upd(13, "d")}, true); len(again) != 1 || peekID(again[0]) != 13 {
		t.Fatalf("redelivery not skipped: %d fresh", len(again))
	}
	j.ack(10)
	j.ack(12)
	if err := j.save(true); err != nil {
		t.Fatal(err)
	}
	k := newJournal(path)
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	if k.nextOffset() != 14 {
		t.Fatalf("next offset = %d, want 14", k.nextOffset())
	}
	var ids []int64
	for _, raw := range k.replay() {
		ids = append(ids, peekID(raw))
	}
	if fmt.Sprint(ids) != "[11 13]" {
		t.Fatalf("replay = %v, want the unacknowledged [11 13]", ids)
	}
}

// A turn that runs through the shutdown grace period acknowledges its
// message after Run (and the journal's writer) ended; the ack must still
// reach the file, or the restart answers the message twice.
func TestJournalAckAfterCloseIsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path)
	if _, err := j.received([]json.RawMessage{upd(30, "a"), upd(31, "b")}, true); err != nil {
		t.Fatal(err)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	if err := j.ack(30); err != nil {
		t.Fatal(err)
	}
	k := newJournal(path)
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, raw := range k.replay() {
		ids = append(ids, peekID(raw))
	}
	if fmt.Sprint(ids) != "[31]" {
		t.Fatalf("replay after a late ack = %v, want [31]", ids)
	}
}

func TestJournalWebhookAcceptsOutOfOrder(t *testing.T) {
	j := newJournal("")
	if f, _ := j.received([]json.RawMessage{upd(20, "x")}, false); len(f) != 1 {
		t.Fatal("first update refused")
	}
	if f, _ := j.received([]json.RawMessage{upd(19, "y")}, false); len(f) != 1 {
		t.Fatal("an earlier update arriving later was dropped")
	}
	j.ack(20)
	if f, _ := j.received([]json.RawMessage{upd(20, "x")}, false); len(f) != 0 {
		t.Fatal("a redelivered, acknowledged update was accepted again")
	}
}

func TestAddressedAndMessageText(t *testing.T) {
	me := &models.User{ID: 9, Username: "my_bot"}
	ent := func(typ models.MessageEntityType, off, n int) []models.MessageEntity {
		return []models.MessageEntity{{Type: typ, Offset: off, Length: n}}
	}
	tests := []struct {
		name      string
		m         models.Message
		addressed bool
		text      string
	}{
		{"plain chatter", models.Message{Text: "hello all"}, false, "hello all"},
		{"mention", models.Message{Text: "@My_Bot what now", Entities: ent(models.MessageEntityTypeMention, 0, 7)}, true, "what now"},
		{"mention after emoji", models.Message{Text: "🙂 @my_bot hi", Entities: ent(models.MessageEntityTypeMention, 3, 7)}, true, "🙂 hi"},
		{"other mention", models.Message{Text: "@other_bot hi", Entities: ent(models.MessageEntityTypeMention, 0, 10)}, false, "@other_bot hi"},
		{"command for us", models.Message{Text: "/new@my_bot", Entities: ent(models.MessageEntityTypeBotCommand, 0, 11)}, true, "/new"},
		{"command for another bot", models.Message{Text: "/new@other_bot", Entities: ent(models.MessageEntityTypeBotCommand, 0, 14)}, false, "/new@other_bot"},
		{"bare command", models.Message{Text: "/status", Entities: ent(models.MessageEntityTypeBotCommand, 0, 7)}, true, "/status"},
		{"reply to bot", models.Message{Text: "more please", ReplyToMessage: &models.Message{From: me}}, true, "more please"},
		{"caption mention", models.Message{Caption: "@my_bot look", CaptionEntities: ent(models.MessageEntityTypeMention, 0, 7)}, true, "look"},
		{"multi-line kept", models.Message{Text: "@my_bot\nline1\n  line2", Entities: ent(models.MessageEntityTypeMention, 0, 7)}, true, "line1\n  line2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := addressed(&tt.m, me); got != tt.addressed {
				t.Errorf("addressed = %v, want %v", got, tt.addressed)
			}
			if got := messageText(&tt.m, me); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.TelegramConfig)
		wantErr string
	}{
		{"no token", func(c *config.TelegramConfig) { c.Token = "" }, "token: must not be empty"},
		{"bad mode", func(c *config.TelegramConfig) { c.Mode = "push" }, "mode"},
		{"webhook without https", func(c *config.TelegramConfig) { c.Mode, c.WebhookURL, c.WebhookSecret = "webhook", "http://x/y", "s" }, "webhook_url"},
		{"webhook without secret", func(c *config.TelegramConfig) { c.Mode, c.WebhookURL = "webhook", "https://x/y" }, "webhook_secret"},
		{"bad proxy", func(c *config.TelegramConfig) { c.Proxy = "ftp://p:1" }, "proxy"},
		{"empty allowlist", func(c *config.TelegramConfig) { c.AllowFrom = nil }, "allow_from"},
		{"ok", func(c *config.TelegramConfig) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.TelegramConfig{Token: "1:x"}
			cfg.AllowFrom = []string{"1"}
			tt.mutate(&cfg)
			_, err := New(cfg, Deps{Bus: nopBus{}}, zap.NewNop())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
