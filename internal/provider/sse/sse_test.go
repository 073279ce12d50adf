package sse

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	Name, Data string
}

// readAll collects the events of body and the error that ended it, with
// the event the end cut short, if any.
func readAll(t *testing.T, body io.Reader, max int) ([]got, got, error) {
	t.Helper()
	r := NewReader(body, max)
	var out []got
	for {
		ev, err := r.Next()
		if err != nil {
			return out, got{ev.Name, string(ev.Data)}, err
		}
		out = append(out, got{ev.Name, string(ev.Data)})
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []got
		pending got
	}{
		{"named events", "event: a\ndata: {\"x\":1}\n\nevent: b\ndata: 2\n\n", []got{{"a", `{"x":1}`}, {"b", "2"}}, got{}},
		{"crlf and no space after the colon", "event:a\r\ndata:1\r\n\r\n", []got{{"a", "1"}}, got{}},
		{"data lines joined", "data: 1\ndata:\ndata: 3\n\n", []got{{"", "1\n\n3"}}, got{}},
		{"comments, ids and blank lines skipped", ": keep-alive\n\n\nid: 7\nretry: 10\ndata: x\n\n", []got{{"", "x"}}, got{}},
		{"one leading space only", "data:  two\n\n", []got{{"", " two"}}, got{}},
		{"event cut short by the end", "data: 1\n\nevent: last\ndata: 2", []got{{"", "1"}}, got{"last", "2"}},
		{"empty body", "", nil, got{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time: events split across reads.
			events, pending, err := readAll(t, iotest.OneByteReader(strings.NewReader(tt.body)), 1<<10)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want io.EOF", err)
			}
			if !reflect.DeepEqual(events, tt.want) || pending != tt.pending {
				t.Errorf("events %q pending %q, want %q %q", events, pending, tt.want, tt.pending)
			}
		})
	}
}

func TestReaderLimits(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // longer than the reader's buffer
	if _, _, err := readAll(t, strings.NewReader("data: "+long+"\n\n"), 64<<10); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("long line: err = %v, want ErrLineTooLong", err)
	}
	events, _, err := readAll(t, strings.NewReader("data: "+long+"\n\n"), 200<<10)
	if !errors.Is(err, io.EOF) || len(events) != 1 || len(events[0].Data) != len(long) {
		t.Errorf("line within the limit: %d events, err %v", len(events), err)
	}
	if _, _, err := readAll(t, strings.NewReader("data: 12345\ndata: 12345\n\n"), 8); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("large event: err = %v, want ErrEventTooLarge", err)
	}
	boom := errors.New("boom")
	if _, _, err := readAll(t, iotest.ErrReader(boom), 8); !errors.Is(err, boom) {
		t.Errorf("read error: err = %v, want it passed on", err)
	}
}
