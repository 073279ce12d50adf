package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

const key = "telegram:42"

func TestRoundTrip(t *testing.T) {
	msgs := sampleTurn()
	tests := []struct {
		name  string
		batch [][]llm.Message // one Append per batch
	}{
		{"one message per append", func() (b [][]llm.Message) {
			for _, m := range msgs {
				b = append(b, []llm.Message{m})
			}
			return b
		}()},
		{"whole turn in one append", [][]llm.Message{msgs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
			var last Snapshot
			for _, b := range tt.batch {
				last = mustAppend(t, s, key, b...)
			}
			equalMessages(t, last.Messages, msgs)
			got := reopen(t, dir, key)
			equalMessages(t, got.Messages, msgs)
			if got.Size != last.Size || got.Size != int64(len(readFile(t, sessionFile(dir, key)))) {
				t.Errorf("size: reloaded %d, after append %d, file %d", got.Size, last.Size, len(readFile(t, sessionFile(dir, key))))
			}
			if !got.Created.Equal(t0) || !last.Created.Equal(t0) {
				t.Errorf("created: reloaded %v, after append %v, want %v", got.Created, last.Created, t0)
			}
		})
	}
}

func TestAppendStampsTimeAndCompacts(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{Clock: clock.Func(func() time.Time { return t0 })}, zaptest.NewLogger(t))
	in := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "same", Summary: "same", Gist: "same"}}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{
			ToolCallID: "c1", Name: "exec", Content: llm.Content{Live: "out", Summary: "out", Gist: "g"}}}}},
	}
	snap := mustAppend(t, s, key, in...)
	if in[0].Parts[0].Summary != "same" || in[1].Parts[0].Result.Content.Summary != "out" {
		t.Fatal("Append modified the caller's messages")
	}
	want := []llm.Message{
		{Role: llm.RoleUser, Time: t0, Parts: []llm.Part{{Kind: llm.PartText, Text: "same"}}},
		{Role: llm.RoleTool, Time: t0, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{
			ToolCallID: "c1", Name: "exec", Content: llm.Content{Live: "out", Gist: "g"}}}}},
	}
	equalMessages(t, snap.Messages, want)
	equalMessages(t, reopen(t, dir, key).Messages, want)
	if b := readFile(t, sessionFile(dir, key)); bytes.Count(b, []byte(`"same"`)) != 1 || bytes.Count(b, []byte(`"out"`)) != 1 {
		t.Errorf("renderings stored twice:\n%s", b)
	}
}

func TestAppendRefusesInvalid(t *testing.T) {
	valid := userText("hi")
	tests := []struct {
		name string
		msgs []llm.Message
		want string
	}{
		{"tool message without results", []llm.Message{{Role: llm.RoleTool}}, "message 0: tool message without results"},
		// See docs/reliability.md#every-turn-ends-with-something-to-read. An
		// answer of nothing was saved as parts: null and replayed.
		{"assistant message without parts", []llm.Message{valid, {Role: llm.RoleAssistant, Meta: &llm.Meta{StopReason: llm.StopEnd}}},
			"message 1: assistant message without parts"},
		{"unknown role", []llm.Message{{Role: "robot", Parts: []llm.Part{llm.Text("x")}}}, `unknown role "robot"`},
		{"part not allowed", []llm.Message{valid, {Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartThinking, Text: "x"}}}},
			`message 1: part 0: kind "thinking" not allowed in a user message`},
		{"tool call without id", []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, Call: &llm.ToolCall{Name: "x"}}}}},
			"tool_call needs id and name"},
		{"arguments not json", []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
			Call: &llm.ToolCall{ID: "c", Name: "x", Arguments: json.RawMessage(`{bad`)}}}}},
			"message 0: json: error calling MarshalJSON"},
		{"image without source", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png"}}}}},
			"image needs data, url or path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
			_, err := s.Append(key, tt.msgs...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), key) {
				t.Fatalf("err = %v, want it to name %q and the key", err, tt.want)
			}
			if _, err := os.Stat(sessionFile(dir, key)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused append touched the disk: %v", err)
			}
		})
	}
}

func TestBadKeys(t *testing.T) {
	s := newStore(t, t.TempDir(), Options{}, zaptest.NewLogger(t))
	// A long key is fine (its file name is hashed, TestLongKeys); one over
	// maxKeyBytes is not.
	for _, k := range []string{"", "bad\xffutf8", strings.Repeat("日", maxKeyBytes/3+1)} {
		if _, err := s.Get(k); err == nil {
			t.Errorf("Get(%q) succeeded", k)
		}
	}
}

func TestMeta(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	route := "anthropic/claude-haiku-4-5"
	none := ""
	// A meta record before any message creates the file with its header.
	if err := s.SetMeta(key, MetaUpdate{Route: &route}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, key, userText("a"), userText("b"), userText("c"))
	for _, u := range []MetaUpdate{
		{Title: ptr("first title")}, {Consolidated: ptr(2)}, {Title: ptr("second title")},
		{Consolidated: ptr(3)}, {Route: &none}, {Route: &route}, {Footer: ptr(true)}, {Footer: ptr(false)}, {Footer: ptr(true)},
	} {
		if err := s.SetMeta(key, u); err != nil {
			t.Fatal(err)
		}
	}
	sizeBefore := readFile(t, sessionFile(dir, key))
	if err := s.SetMeta(key, MetaUpdate{Route: &route, Title: ptr("second title"), Footer: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, sessionFile(dir, key)), sizeBefore) {
		t.Error("an update that changes nothing was written")
	}
	for _, bad := range []int{-1, 4} {
		if err := s.SetMeta(key, MetaUpdate{Consolidated: &bad}); err == nil || !strings.Contains(err.Error(), "outside [0, 3]") {
			t.Errorf("SetMeta(consolidated=%d) err = %v", bad, err)
		}
	}
	for name, snap := range map[string]Snapshot{"live": must(s.Get(key)), "reloaded": reopen(t, dir, key)} {
		if snap.Consolidated != 3 || snap.Route != route || snap.Title != "second title" || !snap.Footer || len(snap.Messages) != 3 {
			t.Errorf("%s: got consolidated=%d route=%q title=%q footer=%v messages=%d", name, snap.Consolidated, snap.Route, snap.Title, snap.Footer, len(snap.Messages))
		}
		if len(snap.Unconsolidated()) != 0 {
			t.Errorf("%s: unconsolidated = %d messages", name, len(snap.Unconsolidated()))
		}
	}
}

func ptr[T any](v T) *T { return &v }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSnapshotIsImmutable(t *testing.T) {
	s := newStore(t, t.TempDir(), Options{}, zaptest.NewLogger(t))
	in := userText("one")
	mustAppend(t, s, key, in)
	in.Parts[0].Text = "changed by the caller"
	mustAppend(t, s, key, userText("two"))
	first := mustAppend(t, s, key, userText("three")) // the store's slice now has spare capacity
	if cap(first.Messages) != len(first.Messages) {
		t.Fatalf("capacity not clipped: len %d cap %d", len(first.Messages), cap(first.Messages))
	}
	mine := append(first.Messages, userText("mine")) // must not write into the store's array
	second := mustAppend(t, s, key, userText("four"))
	if got := texts(first.Messages); got != "one,two,three" {
		t.Errorf("first snapshot changed: %s", got)
	}
	if got := texts(second.Messages); got != "one,two,three,four" {
		t.Errorf("store = %s; the caller's change or append leaked in", got)
	}
	if got := texts(mine); got != "one,two,three,mine" {
		t.Errorf("caller's slice = %s; the store wrote into it", got)
	}
}

func TestKeyMismatch(t *testing.T) {
	dir := t.TempDir()
	file := sessionFile(dir, "cli:a")
	body := []byte(`{"type":"session","v":1,"key":"cli:b","created":"2026-01-02T15:04:05Z"}` + "\n")
	writeFile(t, file, body)
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	for _, op := range []func() error{
		func() error { _, err := s.Get("cli:a"); return err },
		func() error { _, err := s.Append("cli:a", userText("x")); return err },
	} {
		err := op()
		if !errors.Is(err, ErrKeyMismatch) || !strings.Contains(err.Error(), `"cli:a"`) || !strings.Contains(err.Error(), `"cli:b"`) {
			t.Errorf("err = %v, want ErrKeyMismatch naming both keys", err)
		}
	}
	if !bytes.Equal(readFile(t, file), body) {
		t.Error("a mismatched file was modified")
	}
}

func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, sessionFile(dir, key), []byte(`{"type":"session","v":2,"key":"telegram:42"}`+"\n"))
	_, err := newStore(t, dir, Options{}, zaptest.NewLogger(t)).Get(key)
	if err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("err = %v, want a version error", err)
	}
}

func TestFilePermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "workspace", "sessions")
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("NewStore or the first Get created the directory; it must be lazy")
	}
	mustAppend(t, s, key, userText("hi"))
	for path, want := range map[string]os.FileMode{dir: 0o700, sessionFile(dir, key): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// TestSymlinkRefused: a link planted in sessions/ must not redirect writes.
func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	writeFile(t, target, nil)
	if err := os.Symlink(target, sessionFile(dir, key)); err != nil {
		t.Skip(err)
	}
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	if _, err := s.Append(key, userText("x")); err == nil {
		t.Fatal("append through a symlink succeeded")
	}
	if b := readFile(t, target); len(b) != 0 {
		t.Errorf("the link target was written: %q", b)
	}
}

func TestGetDoesNotCreate(t *testing.T) {
	dir := t.TempDir()
	snap, err := newStore(t, dir, Options{}, zaptest.NewLogger(t)).Get(key)
	if err != nil || len(snap.Messages) != 0 || !snap.Created.IsZero() || snap.Key != key {
		t.Fatalf("Get on a new key = %+v, %v", snap, err)
	}
	if _, err := os.Stat(sessionFile(dir, key)); !errors.Is(err, os.ErrNotExist) {
		t.Error("Get created a file")
	}
}

// TestFailedSyncLeavesNoTrace injects an fsync failure: the append fails, the
// bytes are cut off again, and the store then agrees with the disk.
func TestFailedSyncLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	log := newLogs(t)
	s := newStore(t, dir, Options{}, log.Logger)
	mustAppend(t, s, key, userText("kept"))
	before := readFile(t, sessionFile(dir, key))
	s.sync = func(*os.File) error { return errors.New("injected EIO") }
	if _, err := s.Append(key, userText("lost")); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("err = %v, want the injected error", err)
	}
	s.sync = (*os.File).Sync
	if !bytes.Equal(readFile(t, sessionFile(dir, key)), before) {
		t.Error("the failed write was not cut off")
	}
	snap := mustAppend(t, s, key, userText("after"))
	if got := texts(snap.Messages); got != "kept,after" {
		t.Errorf("messages = %s", got)
	}
	if got := texts(reopen(t, dir, key).Messages); got != "kept,after" {
		t.Errorf("reloaded messages = %s", got)
	}
}

func texts(msgs []llm.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return strings.Join(out, ",")
}

func TestLRUEviction(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{CacheSize: 2}, zaptest.NewLogger(t))
	for _, k := range []string{"k:a", "k:b"} {
		mustAppend(t, s, k, userText(k))
	}
	a, _ := cachedEntry(s, "k:a")
	mustAppend(t, s, "k:c", userText("k:c")) // evicts a, the least recently used
	if _, ok := cachedEntry(s, "k:a"); ok || s.Cached() != 2 {
		t.Fatalf("cache holds %d entries, a evicted: %v", s.Cached(), !ok)
	}
	if n := s.Cached(); n != 2 {
		t.Errorf("Cached() = %d, want 2 (the cache size)", n)
	}
	if a.f != nil {
		t.Error("evicted entry kept its file open")
	}
	must(s.Get("k:b"))                       // b is now more recent than c
	mustAppend(t, s, "k:d", userText("k:d")) // evicts c
	if _, ok := cachedEntry(s, "k:b"); !ok {
		t.Error("b was evicted although used more recently than c")
	}
	if _, ok := cachedEntry(s, "k:c"); ok {
		t.Error("c was not evicted")
	}

	// An evicted session is read from disk again: a line added behind the
	// store's back shows up.
	extra := `{"type":"message","message":{"role":"user","parts":[{"kind":"text","text":"added on disk"}]}}` + "\n"
	f, err := os.OpenFile(sessionFile(dir, "k:a"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	snap := mustAppend(t, s, "k:a", userText("again"))
	if got := texts(snap.Messages); got != "k:a,added on disk,again" {
		t.Errorf("reloaded a = %s", got)
	}
	if got := texts(reopen(t, dir, "k:a").Messages); got != "k:a,added on disk,again" {
		t.Errorf("a from disk = %s", got)
	}
}

// TestConcurrent hammers many keys from many goroutines with a cache smaller
// than the number of keys, so eviction and reload race with appends. Run it
// under -race. Each writer's messages must come back complete and in order.
func TestConcurrent(t *testing.T) {
	const keys, writersPerKey, perWriter = 12, 3, 20
	dir := t.TempDir()
	s := newStore(t, dir, Options{CacheSize: 3}, zaptest.NewLogger(t))
	s.sync = func(*os.File) error { return nil } // durability is not under test here; speed is
	var wg sync.WaitGroup
	for k := range keys {
		k := fmt.Sprintf("chat:%d", k)
		for w := range writersPerKey {
			wg.Go(func() {
				for n := range perWriter {
					if _, err := s.Append(k, userText(fmt.Sprintf("%d/%d", w, n))); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Go(func() { // background consolidation and readers
			for n := range perWriter {
				title := fmt.Sprint(n)
				if err := s.SetMeta(k, MetaUpdate{Title: &title}); err != nil {
					t.Error(err)
					return
				}
				snap, err := s.Get(k)
				if err != nil {
					t.Error(err)
					return
				}
				c := len(snap.Messages) / 2
				if err := s.SetMeta(k, MetaUpdate{Consolidated: &c}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkWeight(t, s) // the running byte count survives eviction racing with appends
	if n := s.Cached(); n > 3 {
		t.Errorf("cache holds %d entries after all calls ended, want ≤ 3", n)
	}
	for k := range keys {
		k := fmt.Sprintf("chat:%d", k)
		log := newLogs(t)
		snap, err := newStore(t, dir, Options{}, log.Logger).Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if w := log.warnings(); len(w) > 0 {
			t.Errorf("%s: warnings on load: %v", k, w)
		}
		next := make([]int, writersPerKey)
		for _, m := range snap.Messages {
			var w, n int
			if _, err := fmt.Sscanf(m.Text(), "%d/%d", &w, &n); err != nil || n != next[w] {
				t.Fatalf("%s: message %q out of order (want %d/%d)", k, m.Text(), w, next[w])
			}
			next[w]++
		}
		if len(snap.Messages) != writersPerKey*perWriter || snap.Title != fmt.Sprint(perWriter-1) {
			t.Errorf("%s: %d messages, title %q", k, len(snap.Messages), snap.Title)
		}
	}
}

func TestArchive(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{Clock: clock.Func(func() time.Time { return t0 })}, zaptest.NewLogger(t))

	if p, err := s.Archive("never:written"); err != nil || p != "" {
		t.Fatalf("Archive of a session without a file = %q, %v", p, err)
	}
	mustAppend(t, s, key, userText("old"))
	writeFile(t, sessionFile(dir, key)+tornExt, []byte("torn bytes\n"))
	want := filepath.Join(dir, "telegram_42.20260102T150405Z.jsonl.archive")
	p, err := s.Archive(key)
	if err != nil || p != want {
		t.Fatalf("Archive = %q, %v; want %q", p, err, want)
	}
	if got := texts(mustLoadFile(t, p, key)); got != "old" {
		t.Errorf("archive holds %s", got)
	}
	if b := readFile(t, want+tornExt); string(b) != "torn bytes\n" {
		t.Errorf("torn companion = %q", b)
	}
	snap := must(s.Get(key))
	if len(snap.Messages) != 0 || !snap.Created.IsZero() {
		t.Errorf("after Archive, Get = %d messages, created %v", len(snap.Messages), snap.Created)
	}

	// A second /new within the same second gets its own name.
	mustAppend(t, s, key, userText("new"))
	p2, err := s.Archive(key)
	if want2 := filepath.Join(dir, "telegram_42.20260102T150405Z-2.jsonl.archive"); err != nil || p2 != want2 {
		t.Fatalf("second Archive = %q, %v; want %q", p2, err, want2)
	}
	if got := texts(mustLoadFile(t, p, key)); got != "old" {
		t.Errorf("first archive overwritten: holds %s", got)
	}
	if infos := must(s.List()); len(infos) != 0 {
		t.Errorf("List after archiving = %+v", infos)
	}
}

// mustLoadFile loads a session file found at path (e.g. an archive).
func mustLoadFile(t *testing.T, path, key string) []llm.Message {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, sessionFile(dir, key), readFile(t, path))
	return reopen(t, dir, key).Messages
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	log := newLogs(t)
	s := newStore(t, dir, Options{}, log.Logger)
	if infos, err := s.List(); err != nil || len(infos) != 0 {
		t.Fatalf("List of a missing directory = %v, %v", infos, err)
	}
	sizes := map[string]int64{}
	for _, k := range []string{"telegram:1", "discord:2:thread:3", "cli:local"} {
		sizes[k] = mustAppend(t, s, k, userText("hello "+k)).Size
	}
	mustAppend(t, s, "gone:1", userText("bye"))
	must(s.Archive("gone:1"))
	for _, stray := range []string{"README.txt", ".hidden.jsonl", "Upper.jsonl", "telegram_1.jsonl.torn", ".jsonl"} {
		writeFile(t, filepath.Join(dir, stray), []byte("x\n"))
	}
	if err := os.Mkdir(filepath.Join(dir, "adir.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	log.warnings()
	infos, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, in := range infos {
		got[in.Key] = in.Size
		if in.Path != sessionFile(dir, in.Key) || in.ModTime.IsZero() {
			t.Errorf("info %+v: wrong path or no modtime", in)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(sizes) {
		t.Errorf("List = %v, want %v", got, sizes)
	}
	if w := log.warnings(); len(w) != 2 {
		t.Errorf("warnings = %v, want one per undecodable name (.hidden, Upper)", w)
	}
}

func TestClose(t *testing.T) {
	s := NewStore(t.TempDir(), withCache(Options{}), zaptest.NewLogger(t))
	mustAppend(t, s, key, userText("x"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Get(key); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.Append(key, userText("y")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
}

// TestKeysDoNotBlockEachOther holds one session inside its fsync and checks
// that another session can still append meanwhile.
func TestKeysDoNotBlockEachOther(t *testing.T) {
	s := newStore(t, t.TempDir(), Options{}, zaptest.NewLogger(t))
	inSync, release := make(chan struct{}), make(chan struct{})
	s.sync = func(f *os.File) error {
		if strings.HasSuffix(f.Name(), EncodeKey("chat:a")+liveExt) {
			close(inSync)
			<-release
		}
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if _, err := s.Append("chat:a", userText("slow")); err != nil {
			t.Error(err)
		}
	})
	<-inSync // a holds its lock from here until release
	done := make(chan error)
	go func() { _, err := s.Append("chat:b", userText("fast")); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second): // a failure guard, not a timing assertion
		t.Error("append to b waited for a")
		close(release)
		_ = <-done // already failed above
		return
	}
	close(release)
}

// TestFileAppearedAfterLoad: if a file shows up for a session the store
// believed new, the write is refused rather than mixed in, and the next call
// reads the file.
func TestFileAppearedAfterLoad(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	must(s.Get(key))
	_, other := writeSession(t, userText("written elsewhere"))
	writeFile(t, sessionFile(dir, key), other)
	if _, err := s.Append(key, userText("mine")); err == nil {
		t.Fatal("append over a file the store did not load succeeded")
	}
	snap := mustAppend(t, s, key, userText("mine"))
	if got := texts(snap.Messages); got != "written elsewhere,mine" {
		t.Errorf("messages = %s", got)
	}
}

// Stage writes without an fsync; the session's next Append fsyncs the file
// and so both writes, Sync does it alone, and closing the file (Close, an
// eviction, an archive) does it too. A new file is always fsync'd.
func TestStageIsMadeDurableByTheNextSync(t *testing.T) {
	tests := []struct {
		name  string
		after func(t *testing.T, s *Store, key string)
		syncs int // fsyncs after the Stage, by the step under test
	}{
		{"append", func(t *testing.T, s *Store, key string) { mustAppend(t, s, key, userText("answer")) }, 1},
		{"sync", func(t *testing.T, s *Store, key string) {
			if err := s.Sync(key); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(key); err != nil { // nothing left: no second fsync
				t.Fatal(err)
			}
		}, 1},
		{"close", func(t *testing.T, s *Store, key string) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"eviction", func(t *testing.T, s *Store, key string) { mustAppend(t, s, "chat:other", userText("x")) }, 1 + 2}, // other: new file + dir
		{"archive", func(t *testing.T, s *Store, key string) {
			if _, err := s.Archive(key); err != nil {
				t.Fatal(err)
			}
		}, 1 + 1}, // and the directory, for the rename
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir, Options{CacheSize: 1}, zaptest.NewLogger(t))
			var syncs []string
			s.sync = func(f *os.File) error {
				syncs = append(syncs, filepath.Base(f.Name()))
				return f.Sync()
			}
			const key = "chat:staged"
			mustAppend(t, s, key, userText("first")) // creates the file: fsync'd
			syncs = nil
			snap, err := s.Stage(key, userText("question"))
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Messages) != 2 || len(syncs) != 0 {
				t.Fatalf("Stage: %d messages, fsyncs %v; want 2 and none", len(snap.Messages), syncs)
			}
			tt.after(t, s, key)
			if len(syncs) != tt.syncs || syncs[0] != EncodeKey(key)+liveExt {
				t.Fatalf("fsyncs after the Stage: %v, want %d starting with the staged session's file", syncs, tt.syncs)
			}
		})
	}
	t.Run("new file", func(t *testing.T) {
		s := newStore(t, t.TempDir(), Options{}, zaptest.NewLogger(t))
		n := 0
		s.sync = func(f *os.File) error { n++; return f.Sync() }
		if _, err := s.Stage("chat:new", userText("hello")); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("%d fsyncs for a staged new file, want 2 (file and directory)", n)
		}
	})
}

// Snapshot.Memo is one per loaded copy of a session: the same across calls
// while the session stays loaded (appends included), a new one once it was
// evicted and read again, so nothing derived from the old copy's messages
// is kept with the new one.
func TestMemoLivesAsLongAsTheLoadedSession(t *testing.T) {
	s := NewStore(t.TempDir(), withCache(Options{CacheSize: 1}), zaptest.NewLogger(t))
	defer func() { _ = s.Close() }()
	first := mustAppend(t, s, key, userText("x"))
	if first.Memo == nil {
		t.Fatal("a snapshot has no Memo")
	}
	first.Memo.Store("derived", 1)
	again := mustAppend(t, s, key, userText("y"))
	if again.Memo != first.Memo {
		t.Fatal("an append gave the loaded session a new Memo")
	}
	if got, err := s.Get(key); err != nil || got.Memo != first.Memo {
		t.Fatalf("Get: %v, same Memo %v", err, got.Memo == first.Memo)
	}
	mustAppend(t, s, "other:1", userText("z")) // evicts key: the cache holds one session
	reloaded, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if reloaded.Memo == first.Memo {
		t.Fatal("the session read again kept the Memo of the copy it replaced")
	}
	if _, ok := reloaded.Memo.Load("derived"); ok {
		t.Fatal("the new Memo holds what was derived from the old copy")
	}
}

// TestOldEmptyAnswerIsSkippedOnLoad: a session written before empty answers
// were refused (docs/reliability.md#every-turn-ends-with-something-to-read)
// may hold an assistant message with "parts": null; it loads without it, with
// a warning, instead of being replayed to the model.
func TestOldEmptyAnswerIsSkippedOnLoad(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	if _, err := s.Append(key, userText("hi")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(sessionFile(dir, key), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`{"type":"message","message":{"role":"assistant","parts":null,"meta":{"stop_reason":"stop"}}}` + "\n")
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	snap := reopen(t, dir, key)
	if len(snap.Messages) != 1 || snap.Messages[0].Role != llm.RoleUser {
		t.Fatalf("loaded %+v, want the user message alone", snap.Messages)
	}
}
