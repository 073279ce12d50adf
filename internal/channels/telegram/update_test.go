package telegram

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestDecodeUpdate(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		id      int64
		text    string // the message's; "-" for none
		wantErr bool
	}{
		{"a message", `{"update_id":7,"message":{"message_id":1,"date":1,"chat":{"id":5,"type":"private"},"text":"hi"}}`, 7, "hi", false},
		{"no message (another kind of update)", `{"update_id":8,"callback_query":{"id":"1"}}`, 8, "-", false},
		{"an edited message", `{"update_id":11,"edited_message":{"message_id":1,"date":1,"edit_date":2,"chat":{"id":5,"type":"private"},"text":"hi"}}`, 11, "hi", false},
		{"a null message", `{"update_id":9,"message":null}`, 9, "-", false},
		{"an unreadable message", `{"update_id":10,"message":{"message_id":"one"}}`, 0, "", true},
		{"not JSON", `{"update_id":`, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := decodeUpdate([]byte(tt.raw))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", u)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.ID != tt.id {
				t.Errorf("id %d, want %d", u.ID, tt.id)
			}
			switch {
			case tt.text == "-" && u.Message != nil:
				t.Errorf("message %+v, want none", u.Message)
			case tt.text != "-" && (u.Message == nil || u.Message.Text != tt.text || u.Message.Chat.ID != 5):
				t.Errorf("message %+v, want %q in chat 5", u.Message, tt.text)
			}
		})
	}
}

// An update without a message costs encoding/json nothing lasting. Decoding
// a struct with a *models.Message field would build, and keep, the encoders of
// everything a Message reaches (~300 KB) at the first update of a restart.
// encoding/json's caches are per process, so this is measured in a fresh one.
func TestUpdateWithoutAMessageBuildsNoMessageCache(t *testing.T) {
	const env = "NANOBOT_TELEGRAM_UPDATE_ALLOC_CHILD"
	if os.Getenv(env) == "1" {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		u, err := decodeUpdate([]byte(`{"update_id":1}`))
		after := heap()
		if err != nil || u.Message != nil {
			t.Fatalf("decoded %+v, %v", u, err)
		}
		t.Logf("retained=%d", int64(after)-int64(before))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateWithoutAMessageBuildsNoMessageCache$", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "retained=")
	if !ok {
		t.Fatalf("child reported nothing:\n%s", out)
	}
	field, _, _ := strings.Cut(rest, "\n")
	retained, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
	if err != nil {
		t.Fatalf("child reported %q: %v", field, err)
	}
	if retained > 32<<10 {
		t.Errorf("decoding an update without a message kept %d bytes, want under 32 KiB", retained)
	}
}

// peekID reads the id of the Bot API's form directly and must agree with
// decoding on every valid update: as Telegram writes them, other key
// orders, whitespace, a second update_id (JSON takes the last), numbers
// that are not ids; broken JSON (which no caller passes) must not panic.
func TestPeekIDIsDecoding(t *testing.T) {
	inputs := []string{
		`{"update_id":123456789,"message":{"message_id":1,"text":"hi"}}`,
		`{"update_id":7}`,
		`{"update_id":0,"message":{}}`,
		`{"message":{"text":"x"},"update_id":42}`,
		`{ "update_id": 42, "message": {} }`,
		`{"update_id":5,"message":{"text":"update_id"}}`,
		`{"update_id":5,"update_id":6}`,
		`{"update_id":-5,"message":{}}`,
		`{"update_id":05}`,
		`{"update_id":1.5}`,
		`{"update_id":1e3}`,
		`{"update_id":123456789012345678,"x":1}`,
		`{"update_id":1234567890123456789,"x":1}`,
		`{"update_id":99999999999999999999,"x":1}`,
		`{"update_id":"12"}`,
		`{"update_id":12`,
		`{"update_id":`,
		`{"update_id":12,`,
		`[]`,
		``,
	}
	valid := 0
	for _, in := range inputs {
		got := peekID(json.RawMessage(in)) // broken JSON must not panic; callers never pass it
		if !json.Valid([]byte(in)) {
			continue
		}
		valid++
		if want := decodeID(json.RawMessage(in)); got != want {
			t.Errorf("peekID(%s) = %d, decoding gives %d", in, got, want)
		}
	}
	if valid < 12 {
		t.Fatalf("only %d valid inputs compared", valid)
	}
}
