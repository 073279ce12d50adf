package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxEncodedKey bounds a file-name stem so that the longest derived name
// (`<stem>.<timestamp>-N.jsonl.archive.torn`) stays well under the 255-byte
// file-name limit of common file systems. Keys whose EncodeKey is longer get
// a hashed stem (FileStem).
const maxEncodedKey = 200

// maxKeyBytes bounds a key itself: it is written in every header and log
// line (and, base64'd, in a JetStream subject), so it must stay small.
// Every key the channels and the API make is far shorter (an API key is
// `api:<name ≤ 32>:<id ≤ 128>`).
const maxKeyBytes = 1024

// hashedMark separates a hashed stem's readable prefix from its hash.
// EncodeKey never writes it, so a hashed stem can never equal an encoded
// one, and DecodeKey refuses it.
const hashedMark = '='

// hashedPrefix is how many bytes of the encoded key a hashed stem keeps in
// front, so that `ls` still shows whose session a file is.
const hashedPrefix = 100

// FileStem is the file-name stem (without extension) of key's session file:
// EncodeKey(key) when that fits in maxEncodedKey bytes — every key the store
// accepted before hashed stems existed, so their files keep their names —
// and otherwise `<first ≤100 bytes of EncodeKey(key)>=<32 hex digits of
// SHA-256(key)>`. Such a name cannot be decoded; the key is read from the
// file's header (the key itself is inside the file; see docs/sessions.md).
func FileStem(key string) string {
	enc := EncodeKey(key)
	if len(enc) <= maxEncodedKey {
		return enc
	}
	cut := hashedPrefix
	// Do not split a %XX escape: the prefix stays a valid encoding's start.
	if i := strings.LastIndexByte(enc[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	sum := sha256.Sum256([]byte(key))
	return enc[:cut] + string(hashedMark) + hex.EncodeToString(sum[:16])
}

// isHashedStem reports whether stem is one FileStem made by hashing.
func isHashedStem(stem string) bool { return strings.IndexByte(stem, hashedMark) >= 0 }

// EncodeKey turns a session key into a file-name stem (without extension).
// The encoding is reversible (DecodeKey) and one-to-one. Its output never
// contains '/', ':' or NUL, never starts with '.', and has upper-case letters
// only as hex digits of %XX escapes, so it is safe on every common file
// system, including case-insensitive ones.
//
// Lower-case ASCII letters, digits, '-' and '.' (except a leading '.') are kept;
// ':' — the separator of `channel:chat_id` keys — becomes '_'; every other byte
// becomes %XX (upper-case hex). "telegram:42" encodes as "telegram_42".
func EncodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == ':':
			b.WriteByte('_')
		case isLiteral(c, i):
			b.WriteByte(c)
		default:
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	return b.String()
}

// DecodeKey is the inverse of EncodeKey. It accepts only names EncodeKey can
// produce, so two different names never decode to the same key.
func DecodeKey(name string) (string, error) {
	if name == "" {
		return "", errors.New("decode key: empty name")
	}
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			b = append(b, ':')
		case c == '%':
			if i+2 >= len(name) {
				return "", fmt.Errorf("decode key %q: truncated escape at byte %d", name, i)
			}
			hi, ok1 := unhex(name[i+1])
			lo, ok2 := unhex(name[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("decode key %q: bad escape %q at byte %d", name, name[i:i+3], i)
			}
			d := hi<<4 | lo
			if d == ':' || isLiteral(d, len(b)) {
				return "", fmt.Errorf("decode key %q: %q must not be escaped", name, name[i:i+3])
			}
			b = append(b, d)
			i += 2
		case isLiteral(c, len(b)):
			b = append(b, c)
		default:
			return "", fmt.Errorf("decode key %q: unexpected byte %q at %d", name, c, i)
		}
	}
	return string(b), nil
}

// isLiteral reports whether byte c at position pos of a key is written as is.
func isLiteral(c byte, pos int) bool {
	switch {
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
		return true
	case c == '.':
		return pos > 0
	}
	return false
}

// unhex decodes one upper-case hex digit; lower case is refused so that each
// key has exactly one encoding.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// CheckKey reports whether key is one the stores can keep (see checkKey),
// for stores outside this package that share its rules.
func CheckKey(key string) error { return checkKey(key) }

// checkKey refuses keys the store cannot keep faithfully: empty ones, invalid
// UTF-8 (JSON would replace it, so the header would no longer match), and
// keys over maxKeyBytes. A long key is fine: its file name is hashed.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case !utf8.ValidString(key):
		return errors.New("key is not valid UTF-8")
	case len(key) > maxKeyBytes:
		return fmt.Errorf("key too long (%d bytes, at most %d)", len(key), maxKeyBytes)
	}
	return nil
}
