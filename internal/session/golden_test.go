package session

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// golden compares got with testdata/name, or rewrites the file with -update.
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// TestGoldenFormat pins the on-disk format (docs/sessions.md) in both
// directions: what the store writes, and what it reads from the fixture.
func TestGoldenFormat(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{Clock: clock.Func(stepClock(time.Second))}, zaptest.NewLogger(t))
	turn := sampleTurn()
	mustAppend(t, s, key, turn[:2]...)
	if err := s.SetMeta(key, MetaUpdate{Title: ptr("The report")}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, key, turn[2:]...)
	if err := s.SetMeta(key, MetaUpdate{Consolidated: ptr(2), Route: ptr("anthropic/claude-haiku-4-5")}); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "format.jsonl", readFile(t, sessionFile(dir, key)))

	loaded := newStore(t, t.TempDir(), Options{}, zaptest.NewLogger(t))
	writeFile(t, sessionFile(loaded.dir, key), readFile(t, filepath.Join("testdata", "format.jsonl")))
	snap := must(loaded.Get(key))
	equalMessages(t, snap.Messages, turn)
	if snap.Title != "The report" || snap.Consolidated != 2 || snap.Route != "anthropic/claude-haiku-4-5" || !snap.Created.Equal(t0) {
		t.Errorf("meta from fixture: %+v", snap)
	}
}

// TestGoldenCrashRepair loads testdata/crash.jsonl — a corrupt middle line
// and a torn last line, as after a crash — appends one message, and pins the
// repaired file and the bytes moved to crash.jsonl.torn.
func TestGoldenCrashRepair(t *testing.T) {
	dir := t.TempDir()
	file := sessionFile(dir, key)
	writeFile(t, file, readFile(t, filepath.Join("testdata", "crash.jsonl")))
	log := newLogs(t)
	s := newStore(t, dir, Options{Clock: clock.Func(stepClock(time.Second))}, log.Logger)
	snap := mustAppend(t, s, key, userText("after the crash"))
	if got := texts(snap.Messages); got != "hello,hi there,after the crash" {
		t.Errorf("messages = %s", got)
	}
	if w := log.warnings(); len(w) != 2 {
		t.Errorf("warnings = %v, want the corrupt line and the torn tail", w)
	}
	goldenFile(t, "crash.repaired.jsonl", readFile(t, file))
	goldenFile(t, "crash.jsonl.torn", readFile(t, file+tornExt))
}
