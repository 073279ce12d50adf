package session

import (
	"bytes"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// typeArchive is the record a Log writes to end a conversation. Session
// files never hold it (the file store archives by renaming the file); a log
// of records kept elsewhere marks the start of a fresh conversation with it.
const typeArchive = "archive"

// archivePrefix is how an encoded archive record starts: the record's
// Type is its first field, so Apply recognises one without decoding it.
var archivePrefix = []byte(`{"type":"archive"`)

// Log is one session rebuilt from its records, for a store that keeps the
// records elsewhere than in a file (internal/session/jsstore keeps one
// JetStream message per write). It speaks the file format: the bytes an
// Encode method returns are the lines the file Store would append for the
// same write, and Apply reads them with the file loader's rules (corrupt
// lines skipped with a warning, a header naming another key refused). The
// Encode methods do not change the Log: the store applies the bytes once it
// has written them, so memory never runs ahead of what was stored. A Log is
// not safe for concurrent use.
type Log struct {
	l   loader
	now func() time.Time
}

// NewLog returns the empty log of key. where names the log's storage in
// errors and warnings; now stamps headers, messages and meta records.
func NewLog(key, where string, now func() time.Time, log *zap.Logger) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{
		l:   loader{key: key, path: where, log: log.With(zap.String("session", key), zap.String("log", where))},
		now: now,
	}
}

// Apply reads the records of one write: complete lines, as an Encode
// method returned them. An archive record ends the conversation: what was
// read is dropped and the records after it start a fresh one. The error is
// that of a record that stops loading (ErrKeyMismatch, a newer format); the
// records before it stay applied.
func (g *Log) Apply(data []byte) error {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		g.l.line++
		if bytes.HasPrefix(line, archivePrefix) {
			g.l.st, g.l.header = state{}, false
			continue
		}
		if err := g.l.apply(line); isFatal(err) {
			return err
		} else if err != nil {
			g.l.log.Warn("skipping corrupt session record", zap.Int("record", g.l.line), zap.Error(err))
		}
		g.l.st.size += int64(len(line)) + 1
	}
	return nil
}

// Snapshot returns the session as read so far. Size counts the bytes of
// the current conversation's records.
func (g *Log) Snapshot() Snapshot {
	st := &g.l.st
	n := len(st.msgs)
	return Snapshot{
		Key: g.l.key, Created: st.created, Messages: st.msgs[:n:n], Consolidated: st.consolidated,
		Route: st.route, Title: st.title, Footer: st.footer, Size: st.size,
	}
}

// EncodeAppend validates msgs and returns the lines that append them, with
// the header first when the conversation has no record yet; like
// Store.Append it stamps messages without a Time and compacts them
// (docs/history.md#levels-of-detail).
func (g *Log) EncodeAppend(msgs ...llm.Message) ([]byte, error) {
	if err := validate(msgs); err != nil {
		return nil, err
	}
	enc := newEncoder()
	if g.l.st.size == 0 {
		if err := enc.record(record{Type: typeSession, V: formatVersion, Key: g.l.key, Created: g.now().UTC()}); err != nil {
			return nil, err
		}
	}
	if _, err := enc.messages(msgs, g.now().UTC()); err != nil {
		return nil, err
	}
	return enc.buf.Bytes(), nil
}

// EncodeMeta returns the meta record of u, with the fields that differ
// from the session's values, or nil when none does (Store.SetMeta's rule).
func (g *Log) EncodeMeta(u MetaUpdate) ([]byte, error) {
	r, ok, err := metaRecord(&g.l.st, u, g.now)
	if err != nil || !ok {
		return nil, err
	}
	enc := newEncoder()
	if g.l.st.size == 0 {
		if err := enc.record(record{Type: typeSession, V: formatVersion, Key: g.l.key, Created: g.now().UTC()}); err != nil {
			return nil, err
		}
	}
	if err := enc.record(r); err != nil {
		return nil, err
	}
	return enc.buf.Bytes(), nil
}

// EncodeArchive returns the record that ends the conversation.
func (g *Log) EncodeArchive() ([]byte, error) {
	enc := newEncoder()
	if err := enc.record(record{Type: typeArchive, Time: g.now().UTC()}); err != nil {
		return nil, err
	}
	return enc.buf.Bytes(), nil
}

// validate checks msgs as Append does before anything is written.
func validate(msgs []llm.Message) error {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}
