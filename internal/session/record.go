package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
// Consolidated, Route, Title (a field that is present replaces the old value).
type record struct {
	Type         string          `json:"type"`
	V            int             `json:"v,omitempty"`
	Key          string          `json:"key,omitempty"`
	Created      time.Time       `json:"created,omitzero"`
	Time         time.Time       `json:"time,omitzero"`
	Consolidated *int            `json:"consolidated,omitempty"`
	Route        *string         `json:"route,omitempty"`
	Title        *string         `json:"title,omitempty"`
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
	if err := e.enc.Encode(m); err != nil {
		e.buf.Truncate(start)
		return llm.Message{}, err
	}
	body := e.buf.Bytes()[start+len(`{"type":"message","message":`) : e.buf.Len()-1]
	back, err := decodeMessage(body)
	if err != nil {
		e.buf.Truncate(start)
		return llm.Message{}, fmt.Errorf("does not read back: %w", err)
	}
	e.buf.Truncate(e.buf.Len() - 1) // drop Encode's '\n' to close the record first
	e.buf.WriteString("}\n")
	return back, nil
}

// messages appends a message record per message, stamping those without a
// Time with now and compacting them (S-V5), and returns them as they will
// read back.
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
	if r.Consolidated == nil && r.Route == nil && r.Title == nil {
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

// compact drops renderings that equal a fuller one (S-V5: text is stored once).
// It copies what it changes, so the caller's message is never modified.
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
