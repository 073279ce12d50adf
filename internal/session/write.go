package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// File names in the sessions directory. <stem> is FileStem(key).
const (
	liveExt     = ".jsonl"         // <stem>.jsonl: the live session
	archiveExt  = ".jsonl.archive" // <stem>.<archiveTime>[-N].jsonl.archive
	tornExt     = ".torn"          // <file>.torn: torn tails cut from <file>
	archiveTime = "20060102T150405Z"
)

// liveStem returns the encoded key of a live session file's name.
func liveStem(name string) (string, bool) {
	stem, ok := strings.CutSuffix(name, liveExt)
	return stem, ok && stem != ""
}

// begin starts the bytes of one write, with the header record first when the
// file is still empty. created is the header's time, zero without a header.
func (s *Store) begin(e *entry) (enc *encoder, created time.Time, err error) {
	enc = newEncoder()
	if e.size > 0 {
		return enc, time.Time{}, nil
	}
	created = s.opts.Clock.Now().UTC()
	err = enc.record(record{Type: typeSession, V: formatVersion, Key: e.key, Created: created})
	return enc, created, err
}

// appendMessages encodes msgs into one buffer, writes it (fsync'd if
// durable, see Stage) and adds the messages, as read back from their
// encoding, to e.
func (s *Store) appendMessages(e *entry, msgs []llm.Message, durable bool) error {
	enc, created, err := s.begin(e)
	if err != nil {
		return err
	}
	back, err := enc.messages(msgs, s.opts.Clock.Now().UTC())
	if err != nil {
		return err
	}
	if err := s.write(e, enc.buf.Bytes(), created, durable); err != nil {
		return err
	}
	// Snapshots hold e.msgs with clipped capacity, so appending never
	// touches an element any of them can see.
	e.msgs = append(e.msgs, back...)
	return nil
}

// write appends buf to e's file with one write(2) and, if durable, makes it
// (and any earlier Stage write) durable before returning, creating the file
// (0600, directory 0700) on first use, which is always made durable.
func (s *Store) write(e *entry, buf []byte, created time.Time, durable bool) error {
	newFile := e.f == nil
	if newFile {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return err
		}
		// O_EXCL: a file that appeared since the load must be read, not
		// written after blindly.
		f, err := os.OpenFile(s.path(e.key), os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
		if err != nil {
			s.abandon(e, 0, err)
			return err
		}
		e.f = f
	}
	n, err := e.f.Write(buf)
	durable = durable || newFile
	if err == nil && durable {
		err = s.sync(e.f)
	}
	if err == nil && newFile {
		err = s.syncDir()
	}
	if err != nil {
		s.abandon(e, n, err)
		return err
	}
	e.size += int64(n)
	e.unsynced = !durable
	if !created.IsZero() {
		e.created = created
	}
	return nil
}

// abandon handles a failed write. It cuts off whatever part of the write
// reached the file, so a failed append leaves no trace, then forgets the
// loaded state: the next call reloads the session from what is really on
// disk (and a torn tail the cut could not remove is repaired by that load).
func (s *Store) abandon(e *entry, n int, cause error) {
	log := s.log.With(zap.String("session", e.key))
	if n > 0 && e.f != nil {
		if err := e.f.Truncate(e.size); err != nil {
			log.Error("cannot cut off a failed write", zap.Int64("offset", e.size), zap.Error(err))
		}
	}
	log.Error("session write failed; will reload from disk", zap.Error(cause))
	if err := e.reset(); err != nil {
		log.Warn("closing session file", zap.Error(err))
	}
}

// syncDir makes a file creation or rename in the sessions directory durable.
func (s *Store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	err = s.sync(d)
	// Some file systems cannot sync a directory; the data itself is synced.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
		err = nil
	}
	return errors.Join(err, d.Close())
}

// Archive ends the session for key: its file is renamed to
// <encoded>.<UTC time>.jsonl.archive (with -2, -3... if that name is taken)
// and the session is dropped from memory, so the next Get starts a fresh,
// empty one. It returns the archive's path, or "" when the session had no
// file. A <file>.torn companion is renamed along with it.
func (s *Store) Archive(key string) (string, error) {
	var dst string
	err := s.locked(key, "archive", func(e *entry) error {
		if err := e.reset(); err != nil {
			s.log.Warn("closing session file", zap.String("session", key), zap.Error(err))
		}
		src := s.path(key)
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		name, err := s.archivePath(key)
		if err != nil {
			return err
		}
		if err := os.Rename(src, name); err != nil {
			return err
		}
		dst = name
		if err := os.Rename(src+tornExt, name+tornExt); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("archiving torn-line file", zap.String("session", key), zap.Error(err))
		}
		return s.syncDir()
	})
	return dst, err
}

// archivePath picks an unused archive name. Calls for one key are
// serialised and names embed the key, so checking then renaming cannot race
// within this process.
func (s *Store) archivePath(key string) (string, error) {
	stem := FileStem(key) + "." + s.opts.Clock.Now().UTC().Format(archiveTime)
	for i := 1; i <= 1000; i++ {
		name := stem
		if i > 1 {
			name = fmt.Sprintf("%s-%d", stem, i)
		}
		p := filepath.Join(s.dir, name+archiveExt)
		_, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free archive name for %s", stem)
}
