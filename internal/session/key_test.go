package session

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

func TestEncodeKey(t *testing.T) {
	tests := []struct{ key, want string }{
		{"telegram:42", "telegram_42"},
		{"telegram:-1001234567890:topic:7", "telegram_-1001234567890_topic_7"},
		{"discord:123:thread:456", "discord_123_thread_456"},
		{"cli:local", "cli_local"},
		{"a.b", "a.b"},
		{".hidden", "%2Ehidden"},
		{"..", "%2E."},
		{"../etc/passwd", "%2E.%2Fetc%2Fpasswd"},
		{"under_score", "under%5Fscore"},
		{"100%", "100%25"},
		{"Upper", "%55pper"},
		{"nul\x00byte", "nul%00byte"},
		{"é", "%C3%A9"},
		{"a b", "a%20b"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := EncodeKey(tt.key); got != tt.want {
				t.Errorf("EncodeKey(%q) = %q, want %q", tt.key, got, tt.want)
			}
			back, err := DecodeKey(tt.want)
			if err != nil || back != tt.key {
				t.Errorf("DecodeKey(%q) = %q, %v; want %q", tt.want, back, err, tt.key)
			}
		})
	}
}

// TestDecodeKeyRejects checks that only canonical names decode, so two file
// names can never claim one key.
func TestDecodeKeyRejects(t *testing.T) {
	for _, name := range []string{
		"",            // empty
		".hidden",     // leading dot
		"a/b",         // separator
		"a:b",         // colon is written as _
		"Upper",       // upper case is escaped
		"a%2",         // truncated escape
		"a%",          // truncated escape
		"a%zz",        // not hex
		"a%c3%a9",     // lower-case hex
		"%61",         // 'a' must not be escaped
		"%3A",         // ':' is written as _
		"a%2Eb",       // '.' after the start must not be escaped
		"a b",         // space
		"a\x00b",      // NUL
		"caf\xc3\xa9", // raw UTF-8
	} {
		if key, err := DecodeKey(name); err == nil {
			t.Errorf("DecodeKey(%q) = %q, want an error", name, key)
		}
	}
}

// TestKeyEncodingProperty round-trips random keys built from the characters
// that matter (separators, dots, escapes, unicode, NUL) and checks the safety
// promises of every encoded name.
func TestKeyEncodingProperty(t *testing.T) {
	alphabet := []string{"a", "z", "0", "9", "-", "_", ".", "..", "/", ":", "%", "%2E", "\x00", " ", "A", "Z",
		"é", "日本", "🚀", "\xff", "\n", "\\", "~"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		checkKeyEncoding(t, b.String())
	}
}

func checkKeyEncoding(t *testing.T, key string) {
	t.Helper()
	name := EncodeKey(key)
	// Upper case appears only in %XX escapes, so names never collide on a
	// case-insensitive file system.
	unescaped := escape.ReplaceAllString(name, "")
	if strings.ContainsAny(name, "/:\x00") || strings.HasPrefix(name, ".") || strings.ContainsFunc(unescaped, unicode.IsUpper) {
		t.Fatalf("EncodeKey(%q) = %q: unsafe name", key, name)
	}
	back, err := DecodeKey(name)
	if err != nil || back != key {
		t.Fatalf("DecodeKey(EncodeKey(%q)) = %q, %v", key, back, err)
	}
}

var escape = regexp.MustCompile(`%[0-9A-F]{2}`)

// FuzzKey checks the encoding is a bijection between keys and the names it
// accepts.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"telegram:42", "../x", ".", "%41", "a_b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s != "" {
			checkKeyEncoding(t, s)
		}
		if key, err := DecodeKey(s); err == nil && EncodeKey(key) != s {
			t.Fatalf("DecodeKey(%q) = %q, which encodes as %q", s, key, EncodeKey(key))
		}
	})
}
