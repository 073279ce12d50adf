// Package sse reads server-sent events (text/event-stream), the framing the
// provider adapters (gemini, anthropic) receive their streamed answers in. It
// only splits the body into events; what an event means, and whether an
// event the body's end cut short still counts, is the adapter's business.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrLineTooLong means one line of the body exceeded the reader's limit; the
// stream cannot be read further.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLarge means one event's data exceeded the reader's limit.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one server-sent event.
type Event struct {
	// Name is the event: field, "" when the event had none.
	Name string
	// Data is the event's data: lines joined with "\n". It is only valid
	// until the next call of Next.
	Data []byte
}

// Reader reads the events of one body. It is not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	max int
	ev  Event
	// line is the buffer of the line being read.
	line []byte
	// name is the last event name seen: a stream repeats a few names, so
	// the string is made once per change of name, not per event.
	name string
	// has is set once the event being collected has a field; data once it
	// has a data line (the next one is joined with "\n").
	has, data bool
}

// NewReader reads events from body; max bounds one line and one event's
// data, in bytes.
func NewReader(body io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(body, 32<<10), max: max}
}

// Next returns the next event, ended by a blank line. Comments (lines
// starting with ":") and fields other than event and data (id, retry) are
// skipped. At the end of the body it returns io.EOF, with the event the end
// cut short, if any (Name or Data set): the standard discards such an event,
// some servers end their last event that way. Any other error comes from
// reading the body, or is ErrLineTooLong or ErrEventTooLarge.
func (s *Reader) Next() (Event, error) {
	s.ev.Name, s.ev.Data, s.has, s.data = "", s.ev.Data[:0], false, false
	for {
		line, err := s.readLine()
		if err == nil || (errors.Is(err, io.EOF) && len(line) > 0) {
			if len(line) == 0 {
				if s.has {
					return s.ev, nil
				}
			} else if ferr := s.field(line); ferr != nil {
				return Event{}, ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return s.ev, io.EOF
			}
			return Event{}, err
		}
	}
}

// field adds one "name: value" line to the event being collected.
func (s *Reader) field(line []byte) error {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		if string(value) != s.name {
			s.name = string(value)
		}
		s.ev.Name, s.has = s.name, true
	case "data":
		if s.data {
			s.ev.Data = append(s.ev.Data, '\n')
		}
		s.ev.Data = append(s.ev.Data, value...)
		s.has, s.data = true, true
		if len(s.ev.Data) > s.max {
			return ErrEventTooLarge
		}
	}
	return nil
}

// readLine reads one line without its line ending, however long up to the
// limit.
func (s *Reader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(s.line) > s.max {
				return nil, ErrLineTooLong
			}
			continue
		}
		return bytes.TrimRight(s.line, "\r\n"), err
	}
}
