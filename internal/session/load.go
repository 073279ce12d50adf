package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// load reads e's file into memory and keeps it open for appending. A missing
// file is an empty session. Corrupt lines are skipped with a warning; a torn
// last line is moved to <file>.torn and cut off, so the next append starts on
// a fresh line. Called with e's lock held.
func (s *Store) load(e *entry) error {
	path := s.path(e.key)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|oNoFollow, 0)
	if errors.Is(err, os.ErrNotExist) {
		e.state, e.loaded = state{}, true
		return nil
	}
	if err != nil {
		return err
	}
	l := loader{key: e.key, path: path, log: s.log.With(zap.String("session", e.key), zap.String("file", path))}
	err = l.read(f)
	if err == nil && l.tail != nil {
		err = s.finishTail(f, &l)
	}
	if err != nil {
		return errors.Join(err, f.Close())
	}
	if !l.header && l.st.size > 0 {
		l.log.Warn("session file has no header; its key cannot be verified")
	}
	e.f, e.state, e.loaded = f, l.st, true
	return nil
}

// loader turns the lines of one session file into a state.
type loader struct {
	key, path string
	log       *zap.Logger
	st        state
	header    bool   // a header record was read
	line      int    // number of complete lines read
	tail      []byte // the unterminated last line, if any
}

// read applies every complete line of r and keeps the unterminated tail.
func (l *loader) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for {
		line, err := readLine(br, &long)
		if n := len(line); n > 0 && line[n-1] == '\n' {
			l.line++
			if aerr := l.apply(line[:n-1]); isFatal(aerr) {
				return fmt.Errorf("line %d: %w", l.line, aerr)
			} else if aerr != nil {
				l.log.Warn("skipping corrupt session line",
					zap.Int("line", l.line), zap.Int64("offset", l.st.size), zap.Error(aerr))
			}
			l.st.size += int64(n)
		} else if n > 0 {
			l.tail = bytes.Clone(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line with its '\n' (missing only at EOF). Unlike
// bufio.Scanner it has no length limit; *long is reused for lines longer
// than the reader's buffer.
func readLine(r *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	*long = append((*long)[:0], line...)
	for {
		line, err = r.ReadSlice('\n')
		*long = append(*long, line...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return *long, err
		}
	}
}

// finishTail deals with a last line that has no '\n'. If it is a complete
// record (the crash hit just before the newline) it is kept and terminated;
// otherwise it is torn: its bytes are appended to <file>.torn and the file is
// cut back to its last complete line. Nothing readable is lost either way.
func (s *Store) finishTail(f *os.File, l *loader) error {
	tail := l.tail
	l.tail = nil
	cause := l.apply(tail)
	if isFatal(cause) {
		return fmt.Errorf("line %d: %w", l.line+1, cause)
	}
	if cause == nil {
		if err := s.appendSynced(f, []byte{'\n'}); err != nil {
			return fmt.Errorf("terminating last line: %w", err)
		}
		l.st.size += int64(len(tail)) + 1
		l.log.Warn("last session line had no newline; kept it and added one", zap.Int("line", l.line+1))
		return nil
	}
	torn := l.path + tornExt
	saveErr := s.saveTorn(torn, tail)
	if saveErr == nil {
		if err := f.Truncate(l.st.size); err != nil {
			return fmt.Errorf("cutting torn last line: %w", err)
		}
		if err := s.sync(f); err != nil {
			return fmt.Errorf("cutting torn last line: %w", err)
		}
		l.log.Warn("dropped torn last session line (crash mid-write?)",
			zap.Int64("offset", l.st.size), zap.Int("bytes", len(tail)),
			zap.String("moved_to", torn), zap.NamedError("reason", cause))
		return nil
	}
	// The bytes could not be saved elsewhere, so they stay: a newline turns
	// them into a corrupt line that loads skip, and appends start cleanly.
	if err := s.appendSynced(f, []byte{'\n'}); err != nil {
		return fmt.Errorf("torn last line: cannot save it (%w) nor terminate it: %w", saveErr, err)
	}
	l.st.size += int64(len(tail)) + 1
	l.log.Warn("torn last session line kept in place as a corrupt line",
		zap.Int64("offset", l.st.size), zap.Int("bytes", len(tail)),
		zap.NamedError("reason", cause), zap.NamedError("save_error", saveErr))
	return nil
}

// saveTorn appends a torn tail, plus a newline, to path durably.
func (s *Store) saveTorn(path string, tail []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	err = s.appendSynced(f, append(tail, '\n'))
	return errors.Join(err, f.Close())
}

func (s *Store) appendSynced(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return err
	}
	return s.sync(f)
}

// apply decodes one line and applies it to the state. It changes nothing
// when it returns an error.
func (l *loader) apply(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	// The outer Message field shadows record.Message, so a message is
	// decoded in the same pass.
	var r struct {
		record
		Message *llm.Message `json:"message"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return err
	}
	switch r.Type {
	case typeSession:
		return l.applyHeader(r.record)
	case typeMessage:
		if r.Message == nil {
			return errors.New("message record without a message")
		}
		if err := r.Message.Validate(); err != nil {
			return fmt.Errorf("invalid message: %w", err)
		}
		l.st.msgs = append(l.st.msgs, *r.Message)
	case typeMeta:
		if c := r.Consolidated; c != nil {
			if *c < 0 {
				return fmt.Errorf("negative consolidated offset %d", *c)
			}
			// Offsets count messages; if some earlier lines were lost, clamp
			// to what was read so far (the same on every load).
			if n := len(l.st.msgs); *c > n {
				l.log.Warn("consolidated offset beyond the messages read; clamped",
					zap.Int("line", l.line), zap.Int("offset", *c), zap.Int("messages", n))
				*c = n
			}
		}
		l.st.applyMeta(r.record)
	default:
		return fmt.Errorf("unknown record type %q", r.Type)
	}
	return nil
}

func (l *loader) applyHeader(r record) error {
	switch {
	case r.Key != l.key:
		return fmt.Errorf("%w: file %s holds session %q, not %q", ErrKeyMismatch, l.path, r.Key, l.key)
	case r.V > formatVersion:
		return fmt.Errorf("%w: version %d, this program reads up to %d", errNewerFormat, r.V, formatVersion)
	case r.V < 1:
		return fmt.Errorf("header without a version")
	case l.header:
		return errors.New("second header")
	}
	l.header = true
	l.st.created = r.Created
	return nil
}

// isFatal reports whether a line error stops the load rather than skipping
// the line: the file belongs to another key or to a newer program.
func isFatal(err error) bool {
	return errors.Is(err, ErrKeyMismatch) || errors.Is(err, errNewerFormat)
}
