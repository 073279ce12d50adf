package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// formatVersion is the "v" of the header record. A file with a newer version
// is refused rather than appended to in a format it does not expect.
const formatVersion = 1

// Record types, the "type" field of every line.
const (
	typeSession = "session"
	typeMessage = "message"
	typeMeta    = "meta"
)

// record is one line of a session file. Which fields are set depends on Type:
// session → V, Key, Created; message → Message; meta → Time and any of
// Consolidated, Route, Title, Footer (a field that is present replaces the
// old value).
type record struct {
	Type         string          `json:"type"`
	V            int             `json:"v,omitempty"`
	Key          string          `json:"key,omitempty"`
	Created      time.Time       `json:"created,omitzero"`
	Time         time.Time       `json:"time,omitzero"`
	Consolidated *int            `json:"consolidated,omitempty"`
	Route        *string         `json:"route,omitempty"`
	Title        *string         `json:"title,omitempty"`
	Footer       *bool           `json:"footer,omitempty"`
	Message      json.RawMessage `json:"message,omitempty"`
}

// errNewerFormat marks a header from a newer program; loading stops.
var errNewerFormat = errors.New("newer file format")

// encoder writes records as JSON lines into one buffer, so a whole turn goes
// to disk in a single write. HTML escaping is off to keep files readable.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// record appends r as one line.
func (e *encoder) record(r record) error {
	return e.enc.Encode(r) // Encode terminates the line with '\n'
}

// message appends a message record and returns the message as it will read
// back from disk, so memory and file never disagree.
func (e *encoder) message(m llm.Message) (llm.Message, error) {
	start := e.buf.Len()
	e.buf.WriteString(`{"type":"message","message":`)
	if plainParts(m.Parts) {
		e.buf.Grow(plainSize(&m)) // so appendPlain fills the buffer in place
	}
	if b, ok := appendPlain(e.buf.AvailableBuffer(), &m); ok {
		e.buf.Write(b)
	} else {
		if err := e.enc.Encode(m); err != nil {
			e.buf.Truncate(start)
			return llm.Message{}, err
		}
		e.buf.Truncate(e.buf.Len() - 1) // Encode's '\n'
	}
	back, ok := readBack(m)
	if !ok {
		body := e.buf.Bytes()[start+len(`{"type":"message","message":`):]
		var err error
		if back, err = decodeMessage(body); err != nil {
			e.buf.Truncate(start)
			return llm.Message{}, fmt.Errorf("does not read back: %w", err)
		}
	}
	e.buf.WriteString("}\n")
	return back, nil
}

// readBack returns m as decodeMessage reads it back from its encoding,
// without decoding it, when nothing in m is changed by the encoding but its
// time: parts without a tool call, result, image or file (text and
// thinking: a user's message and a model's answer, most of a session) and
// strings of valid UTF-8 (encoding/json writes U+FFFD for a stray byte). ok
// is false for any other message, which the caller reads back from its
// bytes. The copy shares no slice and no text with m.
// TestReadBackMatchesDecoding holds it to the decoder, and
// TestReadBackKnowsEveryField fails when a message type gains a field.
func readBack(m llm.Message) (back llm.Message, ok bool) {
	if !plainParts(m.Parts) || !utf8.ValidString(string(m.Role)) {
		return llm.Message{}, false
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		if !validUTF8(string(p.Kind), p.Text, p.Summary, p.Gist, p.Signature) {
			return llm.Message{}, false
		}
	}
	back = llm.Message{Role: m.Role, Parts: slices.Clone(m.Parts)}
	if back.Time, ok = readBackTime(m.Time); !ok {
		return llm.Message{}, false
	}
	if m.Meta != nil {
		meta := *m.Meta
		if !validUTF8(meta.Route, meta.Provider, meta.API, meta.Model, string(meta.StopReason)) || !validUTF8(meta.MessageIDs...) {
			return llm.Message{}, false
		}
		meta.MessageIDs = nil // omitempty: an empty list reads back as none
		if len(m.Meta.MessageIDs) > 0 {
			meta.MessageIDs = slices.Clone(m.Meta.MessageIDs)
		}
		back.Meta = &meta
	}
	ownStrings(&back)
	return back, true
}

// ownStrings gives the texts of m (its parts' and its meta's) one copy of
// their own, in one allocation, as the decoder would give them theirs. The
// session keeps them for its life, and the turn's strings may hold more
// than their bytes: a strings.Builder's with room to spare, or a slice of
// a larger buffer.
func ownStrings(m *llm.Message) {
	n := 0
	eachString(m, func(s *string) { n += len(*s) })
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	eachString(m, func(s *string) { b.WriteString(*s) })
	all, off := b.String(), 0
	eachString(m, func(s *string) {
		if l := len(*s); l > 0 {
			*s = all[off : off+l]
			off += l
		}
	})
}

// eachString calls f with every text of m that ownStrings copies; the role
// and part kinds are left shared, being the package's constants.
func eachString(m *llm.Message, f func(*string)) {
	for i := range m.Parts {
		p := &m.Parts[i]
		f(&p.Text)
		f(&p.Summary)
		f(&p.Gist)
		f(&p.Signature)
	}
	if mt := m.Meta; mt != nil {
		f(&mt.Route)
		f(&mt.Provider)
		f(&mt.API)
		f(&mt.Model)
		stop := string(mt.StopReason)
		f(&stop)
		mt.StopReason = llm.StopReason(stop)
		for i := range mt.MessageIDs {
			f(&mt.MessageIDs[i])
		}
	}
}

// readBackTime returns t as it reads back from JSON: in UTC and without a
// monotonic reading it is t itself, which is how the store stamps messages;
// any other zone or reading goes through the text form.
func readBackTime(t time.Time) (time.Time, bool) {
	if t.IsZero() {
		return time.Time{}, true // omitzero
	}
	if t.Location() == time.UTC && t == t.Round(0) {
		return t, true
	}
	b, err := t.MarshalText()
	if err != nil {
		return time.Time{}, false
	}
	var back time.Time
	if err := back.UnmarshalText(b); err != nil {
		return time.Time{}, false
	}
	return back, true
}

func validUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// messages appends a message record per message, stamping those without a
// Time with now and compacting them (docs/history.md#levels-of-detail), and
// returns them as they will read back.
func (e *encoder) messages(msgs []llm.Message, now time.Time) ([]llm.Message, error) {
	back := make([]llm.Message, 0, len(msgs))
	for i, m := range msgs {
		if m.Time.IsZero() {
			m.Time = now
		}
		got, err := e.message(compact(m))
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		back = append(back, got)
	}
	return back, nil
}

// metaRecord returns the meta record that applies u to st: only the fields
// that differ from st's values, ok false when none does (now is read only
// when there is a record to stamp). A Consolidated
// outside [0, len(messages)] is an error.
func metaRecord(st *state, u MetaUpdate, now func() time.Time) (r record, ok bool, err error) {
	if c := u.Consolidated; c != nil && (*c < 0 || *c > len(st.msgs)) {
		return record{}, false, fmt.Errorf("consolidated %d outside [0, %d]", *c, len(st.msgs))
	}
	r = record{Type: typeMeta}
	if c := u.Consolidated; c != nil && *c != st.consolidated {
		r.Consolidated = c
	}
	if v := u.Route; v != nil && *v != st.route {
		r.Route = v
	}
	if v := u.Title; v != nil && *v != st.title {
		r.Title = v
	}
	if v := u.Footer; v != nil && *v != st.footer {
		r.Footer = v
	}
	if r.Consolidated == nil && r.Route == nil && r.Title == nil && r.Footer == nil {
		return record{}, false, nil
	}
	r.Time = now().UTC()
	return r, true, nil
}

// decodeMessage parses and validates a message body.
func decodeMessage(raw []byte) (llm.Message, error) {
	var m llm.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return llm.Message{}, err
	}
	if err := m.Validate(); err != nil {
		return llm.Message{}, fmt.Errorf("invalid message: %w", err)
	}
	return m, nil
}

// compact drops renderings that equal a fuller one (text is stored once; see
// docs/history.md#levels-of-detail). It copies what it changes, so the
// caller's message is never modified.
func compact(m llm.Message) llm.Message {
	var parts []llm.Part
	for i, p := range m.Parts {
		q := compactPart(p)
		if q == nil {
			continue
		}
		if parts == nil {
			parts = append(make([]llm.Part, 0, len(m.Parts)), m.Parts...)
		}
		parts[i] = *q
	}
	if parts != nil {
		m.Parts = parts
	}
	return m
}

// compactPart returns a compacted copy of p, or nil when p is already compact.
func compactPart(p llm.Part) *llm.Part {
	changed := false
	if p.Summary != "" && p.Summary == p.Text {
		p.Summary, changed = "", true
	}
	if p.Gist != "" && (p.Gist == p.Text || p.Gist == p.Summary) {
		p.Gist, changed = "", true
	}
	if p.Result != nil {
		if c := p.Result.Content.Compact(); c != p.Result.Content {
			r := *p.Result
			r.Content = c
			p.Result, changed = &r, true
		}
	}
	if !changed {
		return nil
	}
	return &p
}
