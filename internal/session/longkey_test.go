package session

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/zap/zaptest"
)

// idClasses are the characters docs/api.md allows in a session id, one
// class each: lower case and digits encode to one byte, upper case, '_',
// '@' and '+' to three (%XX).
var idClasses = []struct{ name, chars string }{
	{"upper", "B"}, {"lower", "b"}, {"digits", "7"}, {"dot", "."}, {"underscore", "_"},
	{"at", "@"}, {"plus", "+"}, {"dash", "-"}, {"mixed", "A.z_9@+-Q"},
}

// apiKey is the session key the API makes of a 128-character id of chars.
func apiKey(chars string) string {
	id := strings.Repeat(chars, 128/len(chars)+1)[:128]
	return "api:webui:" + id
}

// TestLongKeys: every key the API allows (1-128 characters of each allowed
// class, under a key name of 32) is kept, read back, listed and archived,
// its file name stays within the limit, and keys that fit keep the
// reversible name.
func TestLongKeys(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	keys := []string{"api:" + strings.Repeat("k", 32) + ":" + strings.Repeat("@", 128)}
	for _, c := range idClasses {
		keys = append(keys, apiKey(c.chars))
	}
	want := map[string]bool{}
	for _, key := range keys {
		mustAppend(t, s, key, userText("hello "+key))
		stem := FileStem(key)
		if len(stem) > maxEncodedKey || strings.ContainsAny(stem, "/:\x00") || strings.HasPrefix(stem, ".") {
			t.Errorf("FileStem(%q) = %q: unsafe or over %d bytes", key, stem, maxEncodedKey)
		}
		if enc := EncodeKey(key); len(enc) <= maxEncodedKey && stem != enc {
			t.Errorf("FileStem(%q) = %q, want the reversible %q", key, stem, enc)
		}
		if got := reopen(t, dir, key); len(got.Messages) != 1 || got.Messages[0].Text() != "hello "+key {
			t.Errorf("reopened %q: %+v", key, got.Messages)
		}
		want[key] = true
	}
	infos, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if !want[in.Key] {
			t.Errorf("List has %q, not written", in.Key)
		}
		delete(want, in.Key)
	}
	if len(want) != 0 {
		t.Errorf("List misses %v", want)
	}
	// The longest derived name: an archive, its -N and .torn companion.
	for _, key := range keys {
		if _, err := s.Archive(key); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, key, userText("again"))
		p, err := s.Archive(key)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(filepath.Base(p) + tornExt); n > 255 {
			t.Errorf("archive %s: %d bytes with %s", p, n, tornExt)
		}
	}
}

// TestHashedStemNeverAnEncoding: a hashed stem can never be mistaken for an
// encoded key (DecodeKey refuses it) and keeps a readable prefix that splits
// no escape.
func TestHashedStemNeverAnEncoding(t *testing.T) {
	if !isHashedStem(FileStem(apiKey("@"))) {
		t.Fatal("128 × @ fits the reversible name; this test checks nothing")
	}
	for _, c := range idClasses {
		key := apiKey(c.chars)
		stem := FileStem(key)
		if !isHashedStem(stem) {
			continue // fits: the reversible name
		}
		if _, err := DecodeKey(stem); err == nil {
			t.Errorf("DecodeKey(%q) succeeded on a hashed stem", stem)
		}
		prefix, _, _ := strings.Cut(stem, string(hashedMark))
		if !strings.HasPrefix(EncodeKey(key), prefix) || strings.Contains(escape.ReplaceAllString(prefix, ""), "%") {
			t.Errorf("FileStem(%q) = %q: prefix splits an escape", key, stem)
		}
	}
}

// TestOldNamesStillFound: files written before hashed stems existed, under
// EncodeKey's name (up to 200 bytes), are found where they are; nothing is
// renamed.
func TestOldNamesStillFound(t *testing.T) {
	dir := t.TempDir()
	keys := []string{
		"telegram:42",
		"api:webui:" + strings.Repeat("b", 190), // 200 bytes encoded: the longest old name
		"api:webui:" + strings.Repeat("B", 63),  // 199 bytes encoded
		"discord:123:thread:456",
	}
	for _, key := range keys {
		name := EncodeKey(key) + liveExt
		if len(EncodeKey(key)) > maxEncodedKey {
			t.Fatalf("test key %q does not have an old name", key)
		}
		// Written as the old store wrote it, by hand.
		writeFile(t, filepath.Join(dir, name), []byte(`{"type":"session","v":1,"key":"`+key+`","created":"2026-01-02T15:04:05Z"}`+"\n"+
			`{"type":"message","message":{"role":"user","parts":[{"kind":"text","text":"old"}],"time":"2026-01-02T15:04:06Z"}}`+"\n"))
	}
	s := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	for _, key := range keys {
		snap := mustAppend(t, s, key, userText("new"))
		if len(snap.Messages) != 2 || snap.Messages[0].Text() != "old" {
			t.Errorf("%q: %d messages, want the old one and the new one", key, len(snap.Messages))
		}
		if _, err := os.Stat(filepath.Join(dir, EncodeKey(key)+liveExt)); err != nil {
			t.Errorf("%q: old file gone: %v", key, err)
		}
	}
	if infos, err := s.List(); err != nil || len(infos) != len(keys) {
		t.Errorf("List = %d sessions, %v; want %d", len(infos), err, len(keys))
	}
	des, _ := os.ReadDir(dir)
	if len(des) != len(keys) {
		t.Errorf("directory holds %d files, want %d (no renames, no new files)", len(des), len(keys))
	}
}

// TestHashedFileWithForeignHeader: a hashed file whose header names another
// key is refused on load and left out of List, as with encoded names.
func TestHashedFileWithForeignHeader(t *testing.T) {
	dir := t.TempDir()
	key := apiKey("@")
	writeFile(t, sessionFile(dir, key), []byte(`{"type":"session","v":1,"key":"api:webui:other","created":"2026-01-02T15:04:05Z"}`+"\n"))
	l := newLogs(t)
	s := newStore(t, dir, Options{}, l.Logger)
	if _, err := s.Get(key); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("Get = %v, want a key mismatch", err)
	}
	if infos, err := s.List(); err != nil || len(infos) != 0 {
		t.Errorf("List = %+v, %v; want nothing", infos, err)
	}
	if w := l.warnings(); len(w) != 1 {
		t.Errorf("warnings = %q, want one about the file", w)
	}
}

// TestFileStemProperty: for random keys of every length up to maxKeyBytes,
// the stem fits, is safe on every common file system, is the reversible
// encoding whenever that fits, and no two keys share one.
func TestFileStemProperty(t *testing.T) {
	alphabet := []string{"a", "0", "-", "_", ".", ":", "@", "+", "B", "%", "é", "🚀", "/", "\x00"}
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[string]string{}
	for range 5000 {
		var b strings.Builder
		for n := rng.IntN(300); n >= 0 && b.Len() < maxKeyBytes-4; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		key := b.String()
		stem := FileStem(key)
		unescaped := escape.ReplaceAllString(stem, "")
		if len(stem) > maxEncodedKey || strings.ContainsAny(stem, "/:\x00") || strings.HasPrefix(stem, ".") ||
			strings.ContainsFunc(unescaped, unicode.IsUpper) || strings.Contains(unescaped, "%") {
			t.Fatalf("FileStem(%q) = %q: unsafe", key, stem)
		}
		if enc := EncodeKey(key); len(enc) <= maxEncodedKey && stem != enc {
			t.Fatalf("FileStem(%q) = %q, want the encoding %q", key, stem, enc)
		}
		if other, ok := seen[stem]; ok && other != key {
			t.Fatalf("%q and %q share the stem %q", key, other, stem)
		}
		seen[stem] = key
	}
}
