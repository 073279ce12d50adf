package jsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanobot-go/nanobot/internal/session"
)

// load reads e's current conversation: from the subject's last record it
// learns where the conversation starts (its Nanobot-Start header), then
// reads the records from there on, so archived conversations are not read
// again. A subject without records is an empty session. Called with e's lock
// held.
func (s *Store) load(ctx context.Context, e *entry) error {
	_, st, err := s.setup(ctx)
	if err != nil {
		return err
	}
	e.log = session.NewLog(e.key, "nats:"+s.n.subject(e.key), s.opts.Clock.Now, s.log)
	e.last, e.start, e.stale, e.loaded = 0, 0, false, false
	last, err := st.GetLastMsgForSubject(ctx, s.n.subject(e.key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		e.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("last record: %w", err)
	}
	from := last.Sequence
	if last.Header.Get(hdrOp) != opArchive {
		if v := last.Header.Get(hdrStart); v != "" {
			if from, err = strconv.ParseUint(v, 10, 64); err != nil || from > last.Sequence {
				return fmt.Errorf("record %d: bad %s header %q", last.Sequence, hdrStart, v)
			}
		}
	}
	if _, _, err := s.readFrom(ctx, st, e, from, ""); err != nil {
		return err
	}
	e.loaded = true
	return nil
}

// catchUp reads the records written to e's subject after e.last and
// returns their kinds and whether one of them is the write named id.
// When the server refused a write as not following e.last but there is
// nothing after it (the subject was purged), the session is loaded afresh.
// Called with e's lock held.
func (s *Store) catchUp(ctx context.Context, e *entry, id string) (kinds []string, mine bool, err error) {
	_, st, err := s.setup(ctx)
	if err != nil {
		return nil, false, err
	}
	kinds, mine, err = s.readFrom(ctx, st, e, e.last+1, id)
	if err != nil {
		e.loaded = false // read it again from scratch on the next use
		return nil, false, err
	}
	if len(kinds) == 0 && id != "" {
		// Refused, yet nothing follows what we read: records were removed.
		if err := s.load(ctx, e); err != nil {
			e.loaded = false
			return nil, false, err
		}
		return []string{"purge"}, false, nil
	}
	e.stale = false
	return kinds, mine, nil
}

// readFrom applies the subject's records from sequence seq on, one direct
// get each, until there is none. It returns their kinds and whether one
// was the write named id.
func (s *Store) readFrom(ctx context.Context, st jetstream.Stream, e *entry, seq uint64, id string) (kinds []string, mine bool, err error) {
	subj := s.n.subject(e.key)
	for {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return kinds, mine, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("record after %d: %w", seq-1, err)
		}
		op := m.Header.Get(hdrOp)
		if err := e.applied(m.Sequence, op, m.Data); err != nil {
			return nil, false, fmt.Errorf("record %d: %w", m.Sequence, err)
		}
		kinds = append(kinds, op)
		mine = mine || id != "" && m.Header.Get(hdrID) == id
		seq = m.Sequence + 1
	}
}

// applied takes the record at seq into e.
func (e *entry) applied(seq uint64, op string, data []byte) error {
	if err := e.log.Apply(data); err != nil {
		return err
	}
	switch {
	case op == opArchive:
		e.start = 0
	case e.start == 0:
		e.start = seq
	}
	e.last = seq
	return nil
}
