package session

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestLoadedSessionWeight measures what MessageOverhead stands for: the heap
// a loaded session of many tiny messages (the shape of the issue 28 attack)
// holds beyond its file's bytes. It logs the measure and fails only if the
// constant undercounts it by more than half, so the byte budget would let
// twice the memory through.
func TestLoadedSessionWeight(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	w := NewStore(dir, withCache(Options{}), zap.NewNop())
	w.sync = func(*os.File) error { return nil } // speed; durability is not measured
	for i := 0; i < n; i += 1000 {
		batch := make([]llm.Message, 0, 1000)
		for j := range 1000 {
			batch = append(batch, userText(fmt.Sprint(i+j)))
		}
		if _, err := w.Append("k:big", batch...); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()

	r := NewStore(dir, withCache(Options{}), zap.NewNop())
	defer func() { _ = r.Close() }()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	snap, err := r.Get("k:big")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	perMsg := (heap - snap.Size) / n
	t.Logf("%d messages, file %d bytes, heap %d bytes: %d bytes a message beyond the file (MessageOverhead %d)",
		n, snap.Size, heap, perMsg, MessageOverhead)
	runtime.KeepAlive(snap)
	if perMsg > 2*MessageOverhead {
		t.Errorf("a loaded message holds %d bytes beyond its file; MessageOverhead (%d) undercounts it by more than half", perMsg, MessageOverhead)
	}
}

// TestLRUEvictionByBytes: with room for many sessions by count, the byte
// budget alone drops the least recently used idle ones, a session bigger
// than the whole budget is not kept once its call ends, and the recorded
// weight always equals what the loaded entries weigh.
func TestLRUEvictionByBytes(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", 4000)
	s := newStore(t, dir, Options{CacheSize: 100, CacheBytes: 10_000}, zaptest.NewLogger(t))
	mustAppend(t, s, "k:a", userText(big))
	mustAppend(t, s, "k:b", userText(big))
	checkWeight(t, s)
	if _, ok := cachedEntry(s, "k:a"); !ok || s.Cached() != 2 {
		t.Fatalf("two sessions of ~4 KB fit 10 KB; cache holds %d", s.Cached())
	}
	mustAppend(t, s, "k:c", userText(big)) // over 10 KB: a, the least recently used, goes
	checkWeight(t, s)
	if _, ok := cachedEntry(s, "k:a"); ok {
		t.Error("a was kept although the cache is over its bytes")
	}
	if _, ok := cachedEntry(s, "k:c"); !ok {
		t.Error("c, the most recently used, was evicted")
	}
	if w := s.CachedBytes(); w > 10_000 {
		t.Errorf("cache weighs %d bytes, budget 10000", w)
	}

	huge := strings.Repeat("y", 20_000)
	snap := mustAppend(t, s, "k:huge", userText(huge))
	checkWeight(t, s)
	if _, ok := cachedEntry(s, "k:huge"); ok {
		t.Error("a session over the whole budget stayed loaded after its call")
	}
	if got := must(s.Get("k:huge")); texts(got.Messages) != texts(snap.Messages) {
		t.Errorf("the evicted session reads back as %q", texts(got.Messages))
	}
	checkWeight(t, s)
}

// checkWeight compares the store's running total with its entries.
func checkWeight(t *testing.T, s *Store) {
	t.Helper()
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for _, e := range c.entries {
		e.mu.Lock()
		if w := e.val.Weight(); w != e.weight {
			t.Errorf("%s weighs %d, recorded %d", e.key, w, e.weight)
		}
		e.mu.Unlock()
		sum += e.weight
	}
	if sum != c.weight {
		t.Errorf("entries weigh %d, the store counts %d", sum, c.weight)
	}
}

// cachedEntry returns key's entry while the store's cache holds it.
func cachedEntry(s *Store, key string) (*entry, bool) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	e, ok := s.cache.entries[key]
	if !ok {
		return nil, false
	}
	return e.val, true
}
