package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolName is the longest function name OpenAI and Anthropic accept.
const maxToolName = 64

// hashLen is how many hex digits of the original name's SHA-256 tell apart
// names that sanitising made equal or too long.
const hashLen = 8

// toolNames maps each of a server's tool names to the name the model sees,
// mcp_<server>_<tool>, limited to [a-zA-Z0-9_-] and 64 characters.
//
// A name that needs no change keeps its plain form. A name that had to be
// truncated, or whose sanitised form collides with another tool's, gets the
// first hashLen hex digits of the SHA-256 of its original name as a suffix.
// The mapping depends only on the set of names, never on their order, so a
// refreshed list gives every surviving tool the name it had before (and the
// provider's prompt cache stays warm) unless the collision set itself changed.
func toolNames(server string, remote []string) map[string]string {
	prefix := "mcp_" + sanitizeName(server) + "_"
	plain := make(map[string]string, len(remote))
	owners := make(map[string][]string, len(remote)) // sanitised name → original names
	for _, r := range remote {
		p := prefix + sanitizeName(r)
		plain[r] = p
		owners[p] = append(owners[p], r)
	}
	out := make(map[string]string, len(remote))
	for _, r := range remote {
		p := plain[r]
		exact := sanitizeName(r) == r // at most one original per sanitised name is exact
		switch {
		case len(p) > maxToolName:
			out[r] = withHash(p, r)
		case len(owners[p]) == 1 || exact:
			out[r] = p
		default:
			out[r] = withHash(p, r)
		}
	}
	return out
}

// withHash cuts name to leave room for "_" and the hash of original.
func withHash(name, original string) string {
	sum := sha256.Sum256([]byte(original))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	return name[:min(len(name), maxToolName-len(suffix))] + suffix
}

// sanitizeName replaces every character outside [a-zA-Z0-9_-] with "_"
// (one per rune, so "größe" and "grosse" stay different lengths and rarely
// collide). An empty name becomes "_".
func sanitizeName(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
