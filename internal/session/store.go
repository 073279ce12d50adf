package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// ErrClosed is returned by every method after Close. The caller is shutting
// down and should stop using the store.
var ErrClosed = errors.New("session store closed")

// ErrConflict means a write was refused because another writer — another
// agent worker of a scaled-out deployment — wrote to the session since this
// store last read it, in a way the write does not commute with (see
// internal/session/jsstore). Nothing was written, and the store has read the
// session again: the caller should Get it and decide whether its write
// still applies (for a turn: whether another worker answered it already).
// The file Store never returns it.
var ErrConflict = errors.New("session changed by another writer")

// ErrKeyMismatch means a session file's header names a different key than the
// one asked for: two keys mapped to one file name, or a file was copied or
// renamed by hand. The file is left untouched; an operator has to look at it.
var ErrKeyMismatch = errors.New("header key mismatch")

// Options configure a Store.
type Options struct {
	// CacheSize is how many sessions stay loaded (messages in memory, file
	// open): agents.session_cache, taken as given. Beyond it the least
	// recently used idle session is dropped; 0 keeps no idle session loaded
	// (one-shot readers such as `nanobot status`).
	CacheSize int
	// CacheBytes caps the loaded sessions by weight, besides their number
	// (agents.session_cache_bytes; 0 as for CacheSize): beyond it the least
	// recently used idle sessions are dropped
	// too, so a few huge sessions cannot pin the memory that CacheSize
	// small ones would take. A session weighs its file's size plus
	// MessageOverhead per message (see Weight).
	CacheBytes int64
	// Clock is the time for header, meta and archive timestamps and for
	// stamping messages that have no Time [clock.System].
	Clock clock.Clock
}

// MessageOverhead is what a loaded message is counted to hold in memory
// besides its bytes in the file: its llm.Message and Part structs and slice
// headers (TestLoadedSessionWeight measures about 120 bytes a tiny message
// beyond its line in the file), plus the agent's memo of its token estimate
// and the garbage collector's headroom, which about double it.
const MessageOverhead = 256

// Weight is what a loaded session counts against Options.CacheBytes: its
// file's size plus MessageOverhead per message. Stores of other backends
// (jsstore) weigh their sessions the same way.
func Weight(fileBytes int64, messages int) int64 {
	return fileBytes + int64(messages)*MessageOverhead
}

// Store keeps sessions as append-only JSONL files in one directory, one file
// per key, with recently used sessions loaded in memory. It is safe for
// concurrent use: calls for different keys run in parallel (their disk I/O
// included); calls for one key are serialised.
type Store struct {
	dir  string
	opts Options
	log  *zap.Logger
	// sync makes a file durable. It is (*os.File).Sync except in tests that
	// inject failures or measure the cost around the fsync.
	sync  func(*os.File) error
	cache *Cache[*entry]
}

// entry is one session in the cache, used with its lock held (see Cache).
type entry struct {
	key    string
	loaded bool
	f      *os.File // nil while the session has no file
	// unsynced is set while the file holds a Stage write not yet fsync'd;
	// the next fsync of the file (Append, Sync, closing it) covers it.
	unsynced bool
	sync     func(*os.File) error // the store's
	state
}

// state is what a session file says, as loaded and appended to.
type state struct {
	size         int64 // bytes of complete lines in the file
	created      time.Time
	msgs         []llm.Message
	consolidated int
	route, title string
	// footer is /usage footer's setting.
	footer bool
	// memo is Snapshot.Memo of this loaded copy: replacing the state (a
	// load, a reload, a reset) starts a new one.
	memo *sync.Map
}

// NewStore returns a store for the session files in dir (the daemon passes
// agents.sessions_dir, after MoveDir). It does no I/O: the directory and files are created
// on the first write.
func NewStore(dir string, opts Options, log *zap.Logger) *Store {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	s := &Store{dir: dir, opts: opts, log: log, sync: (*os.File).Sync}
	s.cache = NewCache(opts.CacheSize, opts.CacheBytes, func(key string) *entry {
		return &entry{key: key, sync: s.sync}
	}, log)
	return s
}

// Snapshot is an immutable view of a session. Messages is never modified
// after it is handed out and its capacity is clipped, so a caller may keep it
// (and even append to its own copy) while others append to the session;
// getting one is O(1). Treat the messages as read-only: their parts are
// shared with the store and with other snapshots.
type Snapshot struct {
	Key string
	// Created is when the session's file was created; zero before the first write.
	Created time.Time
	// Messages are all messages of the session, oldest first.
	Messages []llm.Message
	// Consolidated is how many leading Messages were folded into memory.
	Consolidated int
	// Route is the per-session model route ("" means the default).
	Route string
	// Title is a short human-readable name of the session.
	Title string
	// Footer adds a line of tokens and cost under each answer (/usage
	// footer on).
	Footer bool
	// Size is the session file's size in bytes.
	Size int64
	// Memo holds what users of the store derive from Messages and want to
	// keep between turns (the agent's token estimates of the stored texts).
	// It lives as long as this loaded copy of the session: loading the
	// session again, after an eviction from the cache or a failed write,
	// starts an empty one, so nothing derived outlives the messages it was
	// derived from. Keys are the users' own types, as with context values.
	// It may be nil (a store that keeps nothing loaded, such as the
	// JetStream one): users then derive afresh each time.
	Memo *sync.Map `json:"-"`
}

// Unconsolidated returns the messages not yet folded into memory.
func (s Snapshot) Unconsolidated() []llm.Message { return s.Messages[s.Consolidated:] }

// MetaUpdate names the metadata fields SetMeta changes; nil fields keep their value.
type MetaUpdate struct {
	Consolidated *int
	Route        *string
	Title        *string
	Footer       *bool
}

// Info describes one live session file.
type Info struct {
	Key     string
	Path    string
	Size    int64
	ModTime time.Time
}

// Get returns the session for key. The first call reads its file (or starts
// an empty session if there is none); later calls are O(1) while it stays
// cached.
func (s *Store) Get(key string) (Snapshot, error) {
	var snap Snapshot
	err := s.with(key, "get", func(e *entry) error {
		snap = e.snapshot()
		return nil
	})
	return snap, err
}

// Append validates msgs and appends them to the session with one write and
// one fsync, all or nothing as far as the store can tell. Messages without a
// Time are stamped with Options.Clock; tool-result renderings equal to a fuller
// one are dropped (docs/history.md#levels-of-detail). The returned snapshot
// holds the messages as they will read back from disk. On error nothing is
// added: bytes that reached the file are cut off again, and the session is
// reloaded from the file on the next call.
func (s *Store) Append(key string, msgs ...llm.Message) (Snapshot, error) {
	return s.appendOp(key, "append", true, msgs)
}

// Stage appends msgs like Append, with one write, but does not wait for the
// disk: the session's next Append (or Sync, or the file being closed)
// fsyncs the file, and with it these bytes. It is for a message that is
// safe elsewhere until then — a user message the channel keeps (Telegram's
// update journal, Discord's cursor) until the turn's answer, whose Append
// makes both durable before the answer is sent. A process crash keeps the
// write (it is in the page cache); only a power loss before the next fsync
// can take it, and then the channel delivers the message again. A new
// session file is always fsync'd, with its directory.
func (s *Store) Stage(key string, msgs ...llm.Message) (Snapshot, error) {
	return s.appendOp(key, "stage", false, msgs)
}

// Sync makes whatever Stage wrote to the session durable; it does nothing
// when there is nothing to sync.
func (s *Store) Sync(key string) error {
	return s.locked(key, "sync", func(e *entry) error {
		if e.f == nil || !e.unsynced {
			return nil
		}
		if err := s.sync(e.f); err != nil {
			return err
		}
		e.unsynced = false
		return nil
	})
}

func (s *Store) appendOp(key, op string, durable bool, msgs []llm.Message) (Snapshot, error) {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return Snapshot{}, fmt.Errorf("session %s: append: message %d: %w", key, i, err)
		}
	}
	var snap Snapshot
	err := s.with(key, op, func(e *entry) error {
		if len(msgs) > 0 {
			if err := s.appendMessages(e, msgs, durable); err != nil {
				return err
			}
		}
		snap = e.snapshot()
		return nil
	})
	return snap, err
}

// SetMeta appends a meta record with the fields of u that differ from the
// session's current values; it never rewrites the file. Consolidated must lie
// within [0, len(Messages)].
func (s *Store) SetMeta(key string, u MetaUpdate) error {
	return s.with(key, "set meta", func(e *entry) error {
		r, ok, err := metaRecord(&e.state, u, s.opts.Clock.Now)
		if err != nil || !ok {
			return err
		}
		enc, created, err := s.begin(e)
		if err != nil {
			return err
		}
		if err := enc.record(r); err != nil {
			return err
		}
		if err := s.write(e, enc.buf.Bytes(), created, true); err != nil {
			return err
		}
		e.applyMeta(r)
		return nil
	})
}

// Cached reports how many sessions are loaded in memory, for metrics.
func (s *Store) Cached() int { return s.cache.Len() }

// CachedBytes reports the weight of the loaded sessions (see Weight).
func (s *Store) CachedBytes() int64 { return s.cache.Weight() }

// List describes every live session file in the directory (archives and
// files whose names are not encoded keys are left out), for /status and
// `nanobot status`. A missing directory means no sessions.
func (s *Store) List() ([]Info, error) {
	des, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	var out []Info
	for _, de := range des {
		stem, ok := liveStem(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		key, err := s.stemKey(stem)
		if err != nil {
			s.log.Warn("ignoring file with an undecodable name", zap.String("file", de.Name()), zap.Error(err))
			continue
		}
		fi, err := de.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // archived or removed since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("session: list: %w", err)
		}
		out = append(out, Info{Key: key, Path: filepath.Join(s.dir, de.Name()), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// stemKey is the key of the live file <stem>.jsonl: decoded from the name,
// or, for a hashed stem, read from the file's header and checked against
// the name.
func (s *Store) stemKey(stem string) (string, error) {
	if !isHashedStem(stem) {
		return DecodeKey(stem)
	}
	key, err := headerKey(filepath.Join(s.dir, stem+liveExt))
	if err != nil {
		return "", err
	}
	if FileStem(key) != stem {
		return "", fmt.Errorf("%w: header names %q, whose file is %s%s", ErrKeyMismatch, key, FileStem(key), liveExt)
	}
	return key, nil
}

// headerKey reads the key from the header record on the first line of the
// session file at path.
func headerKey(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	// A header is one short line: the key is at most maxKeyBytes, escaped.
	line, err := bufio.NewReaderSize(io.LimitReader(f, 16<<10), 16<<10).ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("reading the header: %w", err)
	}
	var r record
	if err := json.Unmarshal(line, &r); err != nil || r.Type != typeSession || r.Key == "" {
		return "", fmt.Errorf("first line is not a session header (%v)", err)
	}
	return r.Key, nil
}

// Close closes every cached file. It waits for calls in progress; later calls
// fail with ErrClosed. Everything appended was already fsync'd, and what
// Stage wrote is fsync'd as the file is closed, so Close loses nothing.
func (s *Store) Close() error { return s.cache.Close() }

// Forget drops what the store holds of key in memory, so the next call
// reads its file again. Only needed when another process may have appended
// to the file meanwhile: an agent worker of a scaled-out deployment calls it
// when it takes a session's message (docs/scale-out.md).
func (s *Store) Forget(key string) error {
	return s.locked(key, "forget", func(e *entry) error { return e.reset() })
}

// with runs fn on the loaded entry for key while holding its lock.
func (s *Store) with(key, op string, fn func(*entry) error) error {
	return s.locked(key, op, func(e *entry) error {
		if !e.loaded {
			if err := s.load(e); err != nil {
				return err
			}
		}
		return fn(e)
	})
}

// locked runs fn on the entry for key, loaded or not, while holding its
// lock, and wraps any error with the key and op.
func (s *Store) locked(key, op string, fn func(*entry) error) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("session %q: %s: %w", key, op, err)
	}
	if err := s.cache.Use(key, fn); err != nil {
		return fmt.Errorf("session %s: %s: %w", key, op, err)
	}
	return nil
}

// Weight is e's Weight as loaded now (nothing when not loaded).
func (e *entry) Weight() int64 {
	if !e.loaded {
		return 0
	}
	return Weight(e.size, len(e.msgs))
}

func (s *Store) path(key string) string {
	return filepath.Join(s.dir, FileStem(key)+liveExt)
}

// snapshot returns the immutable view of e. Called with e's lock held.
func (e *entry) snapshot() Snapshot {
	if e.memo == nil {
		e.memo = new(sync.Map)
	}
	n := len(e.msgs)
	return Snapshot{
		Key:          e.key,
		Created:      e.created,
		Messages:     e.msgs[:n:n],
		Consolidated: e.consolidated,
		Route:        e.route,
		Title:        e.title,
		Footer:       e.footer,
		Size:         e.size,
		Memo:         e.memo,
	}
}

// applyMeta takes the fields present in a meta record.
func (st *state) applyMeta(r record) {
	if r.Consolidated != nil {
		st.consolidated = *r.Consolidated
	}
	if r.Route != nil {
		st.route = *r.Route
	}
	if r.Title != nil {
		st.title = *r.Title
	}
	if r.Footer != nil {
		st.footer = *r.Footer
	}
}

// reset forgets everything loaded and closes the file, so the next call
// reloads the session from disk.
func (e *entry) reset() error {
	err := e.Drop()
	e.loaded = false
	e.state = state{}
	return err
}

// Drop closes the session's file, first fsyncing what Stage wrote to it: the
// entry leaves the cache, or is reset.
func (e *entry) Drop() error {
	if e.f == nil {
		return nil
	}
	var err error
	if e.unsynced {
		err = e.sync(e.f)
		e.unsynced = false
	}
	err = errors.Join(err, e.f.Close())
	e.f = nil
	return err
}
