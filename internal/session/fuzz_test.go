package session

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// FuzzLoad feeds arbitrary bytes as a session file. Loading must never
// panic; it may only refuse a file that belongs to another key or a newer
// format. Whatever loads must take an append cleanly: a fresh load then
// returns exactly the loaded session plus the new message.
// The seed corpus is in testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		writeFile(t, sessionFile(dir, key), data)
		open := func() *Store {
			s := NewStore(dir, withCache(Options{Clock: clock.Func(func() time.Time { return t0 })}), zap.NewNop())
			s.sync = func(*os.File) error { return nil } // speed; durability is not under test
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		s := open()
		snap, err := s.Get(key)
		if err != nil {
			if !isFatal(err) {
				t.Fatalf("load failed with a non-fatal error: %v", err)
			}
			return
		}
		after, err := s.Append(key, llm.NewText(llm.RoleUser, "appended"))
		if err != nil {
			t.Fatalf("append after load: %v", err)
		}
		if len(after.Messages) != len(snap.Messages)+1 || after.Messages[len(snap.Messages)].Text() != "appended" {
			t.Fatalf("append: %d messages after, %d before", len(after.Messages), len(snap.Messages))
		}
		again, err := open().Get(key)
		if err != nil {
			t.Fatalf("reload after append: %v", err)
		}
		// Compare as JSON: time zones decoded twice are equal but not DeepEqual.
		if a, b := mustJSON(t, again.Messages), mustJSON(t, after.Messages); a != b {
			t.Fatalf("reloaded messages differ\n got: %s\nwant: %s", a, b)
		}
		if again.Consolidated != after.Consolidated || again.Route != after.Route || again.Title != after.Title || again.Size != after.Size || !again.Created.Equal(after.Created) {
			t.Fatalf("reloaded meta/size %+v, want %+v", again, after)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
