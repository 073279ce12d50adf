package logging

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
)

// minFileSecretLen is the shortest line of a secret file taken as a secret:
// tokens, JWTs, NKey seeds and PEM lines are longer; the prose of a NATS
// credentials file has spaces.
const minFileSecretLen = 16

// FileSecrets returns the secrets kept in a file's content: the trimmed
// content, and each line that looks like a credential (no spaces, at least
// 16 characters, not a "-----BEGIN" or "****" decoration), or the value of
// such a YAML line ("api_key: …"). That covers a web token file, a NATS
// credentials file (JWT and seed), a PEM key and the secrets overlay.
func FileSecrets(content string) []string {
	var out []string
	if t := strings.TrimSpace(content); len(t) >= minFileSecretLen && !strings.ContainsFunc(t, unicode.IsSpace) {
		out = append(out, t)
	}
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimSpace(line)
		// A YAML line "api_key: sk-…" (the secrets overlay) holds its
		// secret after the colon; quotes are YAML's, not the secret's.
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "#") && !strings.ContainsFunc(k, unicode.IsSpace) {
			line = strings.Trim(strings.TrimSpace(v), `"'`)
		}
		if len(line) < minFileSecretLen || strings.ContainsFunc(line, unicode.IsSpace) ||
			strings.HasPrefix(line, "-") || strings.HasPrefix(line, "*") || slices.Contains(out, line) {
			continue
		}
		out = append(out, line)
	}
	return out
}

// Secrets redacts a set of secrets: values known at start and files whose
// content is secret and may change while the daemon runs (the web token,
// rotated by `nanobot web token --rotate`). Redact looks at the files'
// size and time each call, and reads them again when they changed.
// It is safe for concurrent use.
type Secrets struct {
	values []string
	files  []string

	mu     sync.Mutex
	stamps []fileStamp
	r      *strings.Replacer
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// NewSecrets returns the set of values and the contents of files (missing
// files hold nothing yet).
func NewSecrets(values, files []string) *Secrets {
	s := &Secrets{values: values, files: slices.DeleteFunc(slices.Clone(files), func(f string) bool { return f == "" })}
	s.refresh()
	return s
}

// Redact returns text with every secret replaced by "[REDACTED]".
func (s *Secrets) Redact(text string) string {
	if s == nil {
		return text
	}
	s.refresh()
	s.mu.Lock()
	r := s.r
	s.mu.Unlock()
	if r == nil {
		return text
	}
	return r.Replace(text)
}

// Values returns the secrets as of now: the values and the files' contents.
func (s *Secrets) Values() []string {
	out := slices.Clone(s.values)
	for _, f := range s.files {
		if b, err := os.ReadFile(f); err == nil {
			out = append(out, FileSecrets(string(b))...)
		}
	}
	return out
}

// refresh rebuilds the replacer when a file changed since the last call.
func (s *Secrets) refresh() {
	stamps := make([]fileStamp, len(s.files))
	for i, f := range s.files {
		if fi, err := os.Stat(f); err == nil {
			stamps[i] = fileStamp{fi.Size(), fi.ModTime()}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stamps != nil && slices.Equal(stamps, s.stamps) {
		return
	}
	s.stamps = stamps
	s.r = replacer(s.Values())
}
