package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
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
			_ = conn.Close()
		}
	}))
	defer drop.Close()
	tc := traceClient{&http.Client{}}
	req, _ := http.NewRequest(http.MethodPost, drop.URL, strings.NewReader("text=hi"))
	resp, err := tc.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	var aw *errAfterWrite
	if !errors.As(err, &aw) {
		t.Fatalf("dropped after write: %v, want errAfterWrite", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	_ = l.Close()
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr, strings.NewReader("text=hi"))
	if resp, err := tc.Do(req); err == nil || errors.As(err, &aw) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("refused connection: %v, want a plain (retryable) error", err)
	}
}

func upd(id int64, text string) json.RawMessage {
	raw, _ := json.Marshal(models.Update{ID: id, Message: &models.Message{ID: int(id), Text: text, Chat: models.Chat{ID: 1}}})
	return raw
}

// receive journals a batch as the channel does before confirming it:
// received, then its sync.
func receive(j *journal, batch []json.RawMessage, ordered bool) ([]json.RawMessage, error) {
	fresh, sync, err := j.received(batch, ordered)
	if err != nil {
		return nil, err
	}
	return fresh, sync()
}

func TestJournalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	fresh, err := receive(j, []json.RawMessage{upd(10, "a"), upd(11, "b"), upd(12, "c")}, true)
	if err != nil || len(fresh) != 3 {
		t.Fatalf("received = %d, %v", len(fresh), err)
	}
	if again, _ := receive(j, []json.RawMessage{upd(11, "b"), upd(13, "d")}, true); len(again) != 1 || peekID(again[0]) != 13 {
		t.Fatalf("redelivery not skipped: %d fresh", len(again))
	}
	j.ack(10)
	j.ack(12)
	if err := j.save(true); err != nil {
		t.Fatal(err)
	}
	k := newJournal(path, zaptest.NewLogger(t))
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

// A webhook may deliver an acknowledged update again: the recent set knows
// the last recentKeep ids at least, and stays bounded however many pass.
func TestJournalRemembersRecentAcksBounded(t *testing.T) {
	j := newJournal(filepath.Join(t.TempDir(), "j.json"), zaptest.NewLogger(t))
	const n = 5*recentKeep + 123
	for id := int64(1); id <= n; id++ {
		if fresh, _, err := j.received([]json.RawMessage{upd(id, "x")}, false); err != nil || len(fresh) != 1 {
			t.Fatalf("update %d: %d fresh, %v", id, len(fresh), err)
		}
		j.ack(id)
		if len(j.recent) > 2*recentKeep+1 {
			t.Fatalf("after %d acks the recent set holds %d ids", id, len(j.recent))
		}
	}
	for _, id := range []int64{n, n - recentKeep + 1} {
		if fresh, _, err := j.received([]json.RawMessage{upd(id, "x")}, false); err != nil || len(fresh) != 0 {
			t.Errorf("redelivery of acknowledged %d: %d fresh, %v", id, len(fresh), err)
		}
	}
	if fresh, _, _ := j.received([]json.RawMessage{upd(n+1, "y")}, false); len(fresh) != 1 {
		t.Errorf("a new update was taken for a redelivery")
	}
}

// Turns still running when the channel stops (the daemon drains them after
// intake ended) acknowledge their updates later: those acks reach the file
// at once, or a restart would replay and answer them a second time.
func TestJournalAcksAfterTheWriterStoppedAreWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	if _, err := receive(j, []json.RawMessage{upd(10, "a"), upd(11, "b")}, true); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.writer(ctx)
	}()
	stop()
	<-done
	if err := j.save(true); err != nil { // what Run does on its way out
		t.Fatal(err)
	}
	j.ack(10) // a turn that finished during the drain
	k := newJournal(path, zaptest.NewLogger(t))
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	if got := k.replay(); len(got) != 1 || peekID(got[0]) != 11 {
		t.Fatalf("replay after restart = %d updates, want only 11 (10 was acknowledged during the drain)", len(got))
	}
}

func TestJournalWebhookAcceptsOutOfOrder(t *testing.T) {
	j := newJournal("", zaptest.NewLogger(t))
	if f, _ := receive(j, []json.RawMessage{upd(20, "x")}, false); len(f) != 1 {
		t.Fatal("first update refused")
	}
	if f, _ := receive(j, []json.RawMessage{upd(19, "y")}, false); len(f) != 1 {
		t.Fatal("an earlier update arriving later was dropped")
	}
	j.ack(20)
	if f, _ := receive(j, []json.RawMessage{upd(20, "x")}, false); len(f) != 0 {
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
		mutate  func(*Config)
		wantErr string
	}{
		{"no token", func(c *Config) { c.Token = "" }, "token: must not be empty"},
		{"bad mode", func(c *Config) { c.Mode = "push" }, "mode"},
		// A zero value is a caller that skipped config.Defaults: an error,
		// never a silent default of New's own.
		{"no mode", func(c *Config) { c.Mode = "" }, "mode"},
		{"no api_url", func(c *Config) { c.APIURL = "" }, "api_url"},
		{"webhook without https", func(c *Config) { c.Mode, c.WebhookURL, c.WebhookSecret = "webhook", "http://x/y", "s" }, "webhook_url"},
		{"webhook without secret", func(c *Config) { c.Mode, c.WebhookURL = "webhook", "https://x/y" }, "webhook_secret"},
		{"bad proxy", func(c *Config) { c.Proxy = "ftp://p:1" }, "proxy"},
		{"empty allowlist", func(c *Config) { c.AllowFrom = nil }, "allow_from"},
		{"ok", func(c *Config) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Token, cfg.AllowFrom = "1:x", []string{"1"}
			tt.mutate(&cfg)
			_, err := New(cfg, Deps{Bus: nopBus{}}, zap.NewNop())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// journalLines is the journal file's lines.
func journalLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// replayIDs loads the journal at path as a restart does and lists the
// pending update ids.
func replayIDs(t *testing.T, path string) (next int64, ids []int64) {
	t.Helper()
	k := newJournal(path, zaptest.NewLogger(t))
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	for _, raw := range k.replay() {
		ids = append(ids, peekID(raw))
	}
	return k.nextOffset(), ids
}

// A batch and a burst of acks each append one line; the log is compacted
// into one snapshot line once it outgrows the threshold, and reads back the
// same before and after.
func TestJournalAppendsThenCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	j.compactAt = 1 << 20
	if _, err := receive(j, []json.RawMessage{upd(10, "a"), upd(11, "b")}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := receive(j, []json.RawMessage{upd(12, "c")}, true); err != nil {
		t.Fatal(err)
	}
	j.ack(10)
	j.ack(12)
	if err := j.save(false); err != nil {
		t.Fatal(err)
	}
	lines := journalLines(t, path)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"next_offset":12,"pending":[`) ||
		!strings.HasPrefix(lines[1], `{"next_offset":13,"add":[`) || lines[2] != `{"ack":[10,12]}` {
		t.Fatalf("journal lines:\n%s", strings.Join(lines, "\n"))
	}
	if next, ids := replayIDs(t, path); next != 13 || fmt.Sprint(ids) != "[11]" {
		t.Fatalf("log reads back next %d, pending %v; want 13, [11]", next, ids)
	}

	j.compactAt = 1 // any growth past twice a snapshot compacts
	for id := int64(13); id < 40; id++ {
		if _, err := receive(j, []json.RawMessage{upd(id, "more")}, true); err != nil {
			t.Fatal(err)
		}
		j.ack(id)
		if err := j.save(false); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(journalLines(t, path)); n > 8 {
		t.Fatalf("journal has %d lines: never compacted", n)
	}
	if next, ids := replayIDs(t, path); next != 40 || fmt.Sprint(ids) != "[11]" {
		t.Fatalf("compacted log reads back next %d, pending %v; want 40, [11]", next, ids)
	}
	if err := j.finish(); err != nil {
		t.Fatal(err)
	}
	if lines := journalLines(t, path); len(lines) != 1 {
		t.Fatalf("after finish the journal has %d lines, want one snapshot", len(lines))
	}
	var f journalFile // the format before the log still reads it
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &f); err != nil || f.NextOffset != 40 || len(f.Pending) != 1 {
		t.Fatalf("snapshot = %+v, %v", f, err)
	}
}

// What a crash leaves behind: a last line cut short (dropped; a batch cut
// short was never confirmed to Telegram, an ack cut short only replays a
// message the agent recognises), a whole last line without its newline
// (kept), the single-document file of earlier versions, a stale temp file of
// a compaction. A damaged line that is not the last is corruption.
func TestJournalReadsWhatACrashLeaves(t *testing.T) {
	snap := `{"next_offset":11,"pending":[` + string(upd(10, "a")) + `]}`
	add := `{"next_offset":12,"add":[` + string(upd(11, "b")) + `]}`
	tests := []struct {
		name     string
		file     string
		wantNext int64
		wantIDs  string
		wantErr  bool
	}{
		{"whole log", snap + "\n" + add + "\n" + `{"ack":[10]}` + "\n", 12, "[11]", false},
		{"torn batch", snap + "\n" + add[:len(add)/2], 11, "[10]", false},
		{"torn ack", snap + "\n" + add + "\n" + `{"ack":[1`, 12, "[10 11]", false},
		{"last line without newline", snap + "\n" + add, 12, "[10 11]", false},
		{"earlier format, indented", "{\n  \"next_offset\": 11,\n  \"pending\": [\n    {\"update_id\": 10,\n \"message\": {\"message_id\": 10}}\n  ]\n}", 11, "[10]", false},
		{"damaged line in the middle", snap + "\n" + add[:20] + "\n" + `{"ack":[10]}` + "\n", 0, "", true},
		{"damaged first line", `{"next_offset":`, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "telegram-updates.json")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			stale := filepath.Join(dir, ".telegram-updates.json.tmp-123")
			if err := os.WriteFile(stale, []byte(snap[:9]), 0o600); err != nil {
				t.Fatal(err)
			}
			j := newJournal(path, zaptest.NewLogger(t))
			err := j.load()
			if tt.wantErr {
				if err == nil || !errors.Is(err, channels.ErrCorruptState) {
					t.Fatalf("load = %v, want a corrupt-state error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, raw := range j.replay() {
				ids = append(ids, peekID(raw))
			}
			if j.nextOffset() != tt.wantNext || fmt.Sprint(ids) != tt.wantIDs {
				t.Fatalf("next %d, pending %v; want %d, %s", j.nextOffset(), ids, tt.wantNext, tt.wantIDs)
			}
			if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
				t.Error("the stale temp file of a compaction was left")
			}
			// load compacted: the next append starts on a whole line.
			if _, err := receive(j, []json.RawMessage{upd(50, "after")}, true); err != nil {
				t.Fatal(err)
			}
			if _, got := replayIDs(t, path); fmt.Sprint(got) != strings.TrimSuffix(tt.wantIDs, "]")+" 50]" {
				t.Fatalf("after an append the journal reads %v", got)
			}
		})
	}
}

// A failed append may leave a partial line; the next write does not append
// after it but rewrites the file whole.
func TestJournalWriteAfterAFailedAppendCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	if _, err := receive(j, []json.RawMessage{upd(10, "a")}, true); err != nil {
		t.Fatal(err)
	}
	// What a failed write leaves: half a line, and the file handle dropped.
	if _, err := j.f.WriteString(`{"next_offset":99,"add":[{"upd`); err != nil {
		t.Fatal(err)
	}
	_ = j.f.Close()
	j.f = nil
	if _, err := receive(j, []json.RawMessage{upd(11, "b")}, true); err != nil {
		t.Fatal(err)
	}
	if lines := journalLines(t, path); len(lines) != 1 {
		t.Fatalf("journal lines after the failed append: %q", lines)
	}
	if next, ids := replayIDs(t, path); next != 12 || fmt.Sprint(ids) != "[10 11]" {
		t.Fatalf("next %d, pending %v; want 12, [10 11]", next, ids)
	}
}

// A batch is handed over before its fsync. When the fsync fails nothing may
// be confirmed, and what the file holds is unknown (after a failed fsync the
// kernel may have dropped the pages): whatever comes next — the batch
// redelivered because it was not confirmed, a new batch, or acks — rewrites
// the whole state before it is confirmed, and a failed rewrite confirms
// nothing either.
func TestJournalSyncFailureRewritesTheStateBeforeConfirming(t *testing.T) {
	errDisk := errors.New("EIO")
	tests := []struct {
		name string
		// next is what follows the failed sync, as the caller would run it:
		// it returns the updates handed over and the sync's error.
		next     func(j *journal) ([]json.RawMessage, error)
		wantNext int64
		wantIDs  string
	}{
		{"the batch redelivered", func(j *journal) ([]json.RawMessage, error) {
			return receive(j, []json.RawMessage{upd(11, "b"), upd(12, "c")}, true)
		}, 13, "[10 11 12]"},
		{"the batch redelivered by webhook", func(j *journal) ([]json.RawMessage, error) {
			return receive(j, []json.RawMessage{upd(12, "c")}, false)
		}, 13, "[10 11 12]"},
		{"a new batch", func(j *journal) ([]json.RawMessage, error) {
			return receive(j, []json.RawMessage{upd(13, "d")}, true)
		}, 14, "[10 11 12 13]"},
		{"acks", func(j *journal) ([]json.RawMessage, error) {
			j.ack(11)
			return nil, j.save(false)
		}, 13, "[10 12]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.json")
			j := newJournal(path, zaptest.NewLogger(t))
			j.compactAt = 1 << 20
			if _, err := receive(j, []json.RawMessage{upd(10, "a")}, true); err != nil {
				t.Fatal(err)
			}
			syncs := 0
			j.fsync = func(*os.File) error { syncs++; return errDisk }
			fresh, sync, err := j.received([]json.RawMessage{upd(11, "b"), upd(12, "c")}, true)
			if err != nil || len(fresh) != 2 {
				t.Fatalf("received = %d fresh, %v; want the 2 written, to hand over", len(fresh), err)
			}
			if err := sync(); !errors.Is(err, errDisk) {
				t.Fatalf("sync = %v, want the fsync's error (the batch must not be confirmed)", err)
			}
			if !j.dirty {
				t.Fatal("a failed fsync left the journal clean")
			}

			// The disk is still failing: a rewrite fails too, and nothing is
			// confirmed, however it is asked.
			restore := breakDir(t, filepath.Dir(path))
			if _, err := tt.next(j); err == nil {
				t.Fatal("confirmed while the journal could not be rewritten")
			}
			if !j.dirty {
				t.Fatal("a failed rewrite left the journal clean")
			}
			restore()
			// What the file holds before the next attempt: the failed batch
			// appended after the first, as a log.
			if lines := journalLines(t, path); len(lines) != 2 {
				t.Fatalf("journal before the rewrite: %q", lines)
			}

			// The disk is back: the next confirm follows a full rewrite, not
			// an fsync of the file as it was.
			j.fsync = func(f *os.File) error { syncs++; return f.Sync() }
			if _, err := tt.next(j); err != nil {
				t.Fatalf("after the disk recovered: %v", err)
			}
			if j.dirty {
				t.Fatal("still dirty after a successful rewrite")
			}
			lines := journalLines(t, path)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], `{"next_offset":`+fmt.Sprint(tt.wantNext)+`,"pending":[`) {
				t.Fatalf("journal after the confirm is not one snapshot of next %d: %q", tt.wantNext, lines)
			}
			next, pending, err := ReadJournal(path) // unlike a load, leaves the file to j
			var ids []int64
			for _, raw := range pending {
				ids = append(ids, peekID(raw))
			}
			if err != nil || next != tt.wantNext || fmt.Sprint(ids) != tt.wantIDs {
				t.Fatalf("journal reads next %d, pending %v, %v; want %d, %s", next, ids, err, tt.wantNext, tt.wantIDs)
			}

			// And appends resume on the rewritten file.
			syncs = 0
			if _, err := receive(j, []json.RawMessage{upd(20, "z")}, true); err != nil {
				t.Fatal(err)
			}
			if n := len(journalLines(t, path)); n != 2 || syncs != 1 {
				t.Fatalf("after the next batch: %d lines, %d fsyncs; want an append and its fsync", n, syncs)
			}
		})
	}
}

// A compaction (the writer's, or finish's) that fails between a batch's
// write and its sync has closed the file the batch went to: the sync must
// not take that for a file with nothing left to fsync.
func TestJournalFailedCompactionBeforeTheSyncConfirmsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	if _, err := receive(j, []json.RawMessage{upd(10, "a")}, true); err != nil {
		t.Fatal(err)
	}
	_, sync, err := j.received([]json.RawMessage{upd(11, "b")}, true)
	if err != nil {
		t.Fatal(err)
	}
	restore := breakDir(t, filepath.Dir(path))
	j.wmu.Lock()
	err = j.compact()
	j.wmu.Unlock()
	if err == nil {
		t.Fatal("compaction into a missing directory succeeded")
	}
	if err := sync(); err == nil {
		t.Fatal("sync confirmed a batch whose file was closed by a failed compaction")
	}
	restore()
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	if lines := journalLines(t, path); len(lines) != 1 || !strings.HasPrefix(lines[0], `{"next_offset":12,"pending":[`) {
		t.Fatalf("journal after the confirm: %q, want one snapshot", lines)
	}
}

// breakDir makes writes into dir fail, as a failing disk would, until
// restore: dir is moved away and a file takes its place, so neither a temp
// file nor MkdirAll can be made there.
func breakDir(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".away", dir); err != nil {
			t.Fatal(err)
		}
	}
}

// Webhook bodies may be indented; the journal keeps each update on one line.
func TestJournalKeepsIndentedUpdatesOnOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	j := newJournal(path, zaptest.NewLogger(t))
	j.compactAt = 1 << 20
	if _, err := receive(j, []json.RawMessage{upd(1, "a")}, false); err != nil {
		t.Fatal(err)
	}
	body := json.RawMessage("{\n  \"update_id\": 7,\n  \"message\": {\"message_id\": 7, \"text\": \"two\\nlines\"}\n}")
	if _, err := receive(j, []json.RawMessage{body}, false); err != nil {
		t.Fatal(err)
	}
	if lines := journalLines(t, path); len(lines) != 2 {
		t.Fatalf("journal lines: %q", lines)
	}
	if _, ids := replayIDs(t, path); fmt.Sprint(ids) != "[1 7]" {
		t.Fatalf("pending %v, want [1 7]", ids)
	}
}

// The bot library streams forms through a pipe; a small one is sent with
// its length (one write), a large one (an upload) as it comes, and either
// arrives whole.
func TestFixLengthSendsSmallFormsWhole(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		wantFixed bool
	}{
		{"empty", 0, true},
		{"small form", 900, true},
		{"at the bound", smallBody, true},
		{"upload", smallBody*3 + 17, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := strings.Repeat("x", tt.size)
			var got string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got = string(b)
				if tt.wantFixed && (r.ContentLength != int64(tt.size) || len(r.TransferEncoding) > 0) {
					t.Errorf("sent with length %d, encoding %v; want length %d", r.ContentLength, r.TransferEncoding, tt.size)
				}
			}))
			defer srv.Close()
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < len(want); i += 1000 {
					_, _ = pw.Write([]byte(want[i:min(i+1000, len(want))]))
				}
				_ = pw.Close()
			}()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
			resp, err := traceClient{srv.Client()}.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got != want {
				t.Fatalf("server got %d bytes, want %d", len(got), len(want))
			}
		})
	}
	t.Run("form that fails to build", func(t *testing.T) {
		pr, pw := io.Pipe()
		pw.CloseWithError(errors.New("bad form"))
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", pr)
		var ae *errAfterWrite
		if resp, err := (traceClient{http.DefaultClient}).Do(req); err == nil || errors.As(err, &ae) {
			if err == nil {
				resp.Body.Close()
			}
			t.Fatalf("err = %v, want a plain error (nothing sent)", err)
		}
	})
}
