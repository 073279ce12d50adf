package session

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// writeSession writes msgs for key into a fresh directory through the store
// and returns the directory and the file's bytes.
func writeSession(t *testing.T, msgs ...llm.Message) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	mustAppend(t, s, key, msgs...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, readFile(t, sessionFile(dir, key))
}

// TestTornLastLine cuts a valid file at every byte offset of its last line,
// as a crash in the middle of a write could. Every cut must load with a
// warning, keep every complete line, move the torn bytes to <file>.torn, and
// leave the file ready for a clean append.
func TestTornLastLine(t *testing.T) {
	msgs := []llm.Message{userText("first"), userText("second"), sampleTurn()[4]}
	_, full := writeSession(t, msgs...)
	start := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1 // first byte of the last line
	for cut := start; cut < len(full); cut++ {
		t.Run(fmt.Sprint(cut-start), func(t *testing.T) {
			dir := t.TempDir()
			file := sessionFile(dir, key)
			writeFile(t, file, full[:cut])
			log := newLogs(t)
			s := newStore(t, dir, Options{}, log.Logger)
			s.sync = func(*os.File) error { return nil } // hundreds of cases; durability is tested elsewhere
			snap, err := s.Get(key)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			warnings := log.warnings()
			switch {
			case cut == start: // the cut fell between lines: nothing is torn
				equalMessages(t, snap.Messages, msgs[:2])
				if len(warnings) != 0 {
					t.Errorf("warnings = %v, want none", warnings)
				}
			case cut == len(full)-1: // only the newline is missing: the record is whole
				equalMessages(t, snap.Messages, msgs)
				if len(warnings) != 1 || !bytes.Equal(readFile(t, file), full) {
					t.Errorf("warnings = %v, file terminated: %v", warnings, bytes.Equal(readFile(t, file), full))
				}
			default:
				equalMessages(t, snap.Messages, msgs[:2])
				if len(warnings) != 1 || !strings.Contains(warnings[0], "torn") {
					t.Errorf("warnings = %v, want one about the torn line", warnings)
				}
				if got, want := readFile(t, file+tornExt), append(bytes.Clone(full[start:cut]), '\n'); !bytes.Equal(got, want) {
					t.Errorf("torn file = %q, want %q", got, want)
				}
				if got := readFile(t, file); !bytes.Equal(got, full[:start]) {
					t.Errorf("file not cut back to its last complete line: %d bytes, want %d", len(got), start)
				}
			}
			if snap.Size != int64(len(readFile(t, file))) {
				t.Errorf("snapshot size %d, file %d", snap.Size, len(readFile(t, file)))
			}

			after := mustAppend(t, s, key, userText("after the crash"))
			relog := newLogs(t)
			again, err := newStore(t, dir, Options{}, relog.Logger).Get(key)
			if err != nil {
				t.Fatal(err)
			}
			equalMessages(t, again.Messages, after.Messages)
			if w := relog.warnings(); len(w) != 0 {
				t.Errorf("warnings on the next load: %v", w)
			}
		})
	}
}

func TestTornHeader(t *testing.T) {
	_, full := writeSession(t, userText("x"))
	header := full[:bytes.IndexByte(full, '\n')]
	dir := t.TempDir()
	writeFile(t, sessionFile(dir, key), header[:len(header)/2])
	log := newLogs(t)
	s := newStore(t, dir, Options{}, log.Logger)
	snap := mustAppend(t, s, key, userText("fresh"))
	if len(log.warnings()) != 1 || snap.Created.IsZero() {
		t.Errorf("torn header: want one warning and a new header")
	}
	b := readFile(t, sessionFile(dir, key))
	if !bytes.HasPrefix(b, []byte(`{"type":"session","v":1,"key":"telegram:42"`)) {
		t.Errorf("file does not start with a new header:\n%s", b)
	}
	equalMessages(t, reopen(t, dir, key).Messages, snap.Messages)
}

// TestCorruptLine puts one bad line in the middle of a session: it is skipped
// with a warning, everything else loads, and the file is not rewritten.
func TestCorruptLine(t *testing.T) {
	msgs := []llm.Message{userText("one"), userText("two"), userText("three")}
	_, full := writeSession(t, msgs...)
	lines := bytes.SplitAfter(full, []byte("\n")) // header, one, two, three, ""
	tests := []struct {
		name, line string
		warns      int
	}{
		{"garbage", "not json at all", 1},
		{"cut json", `{"type":"message","message":{"role":"us`, 1},
		{"nul bytes", "\x00\x00\x00\x00", 1},
		{"invalid message", `{"type":"message","message":{"role":"tool","parts":[]}}`, 1},
		{"unknown role", `{"type":"message","message":{"role":"robot","parts":[]}}`, 1},
		{"null message", `{"type":"message","message":null}`, 1},
		{"unknown type", `{"type":"bogus"}`, 1},
		{"no type", `{"key":"x"}`, 1},
		{"second header", `{"type":"session","v":1,"key":"telegram:42"}`, 1},
		{"negative offset", `{"type":"meta","consolidated":-1,"title":"t"}`, 1},
		{"json array", `[1,2,3]`, 1},
		{"blank", "", 0},
		{"spaces", "   \t", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := sessionFile(dir, key)
			body := slicesConcat(lines[0], lines[1], []byte(tt.line+"\n"), lines[2], lines[3])
			writeFile(t, file, body)
			log := newLogs(t)
			s := newStore(t, dir, Options{}, log.Logger)
			snap, err := s.Get(key)
			if err != nil {
				t.Fatal(err)
			}
			equalMessages(t, snap.Messages, msgs)
			if w := log.warnings(); len(w) != tt.warns {
				t.Errorf("warnings = %v, want %d", w, tt.warns)
			}
			if snap.Title != "" {
				t.Errorf("a rejected meta record was applied: title %q", snap.Title)
			}
			if !bytes.Equal(readFile(t, file), body) {
				t.Error("loading rewrote the file")
			}
			after := mustAppend(t, s, key, userText("four"))
			equalMessages(t, reopen(t, dir, key).Messages, after.Messages)
		})
	}
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestMissingHeaderStillLoads(t *testing.T) {
	_, full := writeSession(t, userText("one"))
	dir := t.TempDir()
	writeFile(t, sessionFile(dir, key), full[bytes.IndexByte(full, '\n')+1:])
	log := newLogs(t)
	snap, err := newStore(t, dir, Options{}, log.Logger).Get(key)
	if err != nil || texts(snap.Messages) != "one" {
		t.Fatalf("got %q, %v", texts(snap.Messages), err)
	}
	if w := log.warnings(); len(w) != 1 || !strings.Contains(w[0], "no header") {
		t.Errorf("warnings = %v", w)
	}
}

func TestConsolidatedClampedOnLoad(t *testing.T) {
	_, full := writeSession(t, userText("one"), userText("two"))
	dir := t.TempDir()
	// The offset claims 5 messages but only 2 precede it (lines were lost).
	writeFile(t, sessionFile(dir, key), append(bytes.Clone(full), `{"type":"meta","consolidated":5}`+"\n"...))
	log := newLogs(t)
	s := newStore(t, dir, Options{}, log.Logger)
	snap := must(s.Get(key))
	if snap.Consolidated != 2 || len(log.warnings()) != 1 {
		t.Errorf("consolidated = %d, want 2 with a warning", snap.Consolidated)
	}
	// The clamp depends on the records before the meta line only, so it is the
	// same after more appends.
	mustAppend(t, s, key, userText("three"))
	if got := reopen(t, dir, key).Consolidated; got != 2 {
		t.Errorf("after an append, consolidated = %d, want 2", got)
	}
}

// TestHugeLine stores a message far larger than any scanner buffer.
func TestHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 16 MB")
	}
	big := strings.Repeat("0123456789abcdef", 16<<20/16)
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	mustAppend(t, s, key, userText("before"), userText(big), userText("after"))
	got := reopen(t, dir, key).Messages
	if len(got) != 3 || got[1].Text() != big || got[2].Text() != "after" {
		t.Fatalf("reloaded %d messages; big intact: %v", len(got), len(got) > 1 && got[1].Text() == big)
	}
}

// TestUnreadableFile checks that an I/O error surfaces as an error naming
// the session, not a panic or a silently empty session.
func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(sessionFile(dir, key), 0o700); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	for _, op := range []func() error{
		func() error { _, err := s.Get(key); return err },
		func() error { _, err := s.Append(key, userText("x")); return err },
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "session telegram:42: ") {
			t.Errorf("err = %v, want an error naming the session", err)
		}
	}
}
