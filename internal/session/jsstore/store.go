package jsstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

// Options configure a Store.
type Options struct {
	// CacheSize is how many sessions stay loaded (agents.session_cache,
	// taken as given); beyond it the least recently used idle one is
	// dropped (and read again on its next use). 0 keeps no idle session.
	CacheSize int
	// CacheBytes caps the loaded sessions by weight too (session.Weight;
	// agents.session_cache_bytes); beyond it the least recently used idle
	// ones are dropped.
	CacheBytes int64
	// Clock stamps headers, messages without a Time, meta and archive
	// records [clock.System].
	Clock clock.Clock
	// Timeout bounds one call, waiting for NATS included: a publish is
	// retried across a NATS restart within it [defaultTimeout].
	Timeout time.Duration
}

const (
	// defaultTimeout bounds one call; not a config key: it only has to
	// outlast a NATS restart, and the turn's own limits bound the wait.
	defaultTimeout = 2 * time.Minute
	// retryWait is the pause between two attempts to reach NATS.
	retryWait = 250 * time.Millisecond
	// maxRebase bounds how often one write is rebased after commuting
	// records; past it the caller gets session.ErrConflict.
	maxRebase = 8
)

// Headers of every record. They are the store's bookkeeping; the record
// itself is the data, in the file format.
const (
	// hdrOp is what the record does: opMessages, opMeta or opArchive.
	hdrOp = "Nanobot-Op"
	// hdrID names one write, the same on every attempt to publish it, so a
	// write whose acknowledgement was lost is recognised when it is read.
	hdrID = "Nanobot-Write"
	// hdrStart is the stream sequence of the first record of the
	// conversation the record belongs to (absent on that first record), so
	// a load reads from there instead of from the subject's beginning.
	hdrStart = "Nanobot-Start"
	// hdrSize is the conversation's size in bytes with this record, for List.
	hdrSize = "Nanobot-Size"
)

const (
	opMessages = "messages"
	opMeta     = "meta"
	opArchive  = "archive"
)

// Store keeps sessions in the <PREFIX>_SESSIONS stream, with recently used
// sessions loaded in memory. It offers the methods of *session.Store with
// the same meaning. Calls for different keys run in parallel; calls for one
// key are serialised. Constructing it does no I/O; the first call creates
// or updates the stream.
type Store struct {
	conn natsbus.JetStreamer
	n    names
	opts Options
	log  *zap.Logger

	setupMu sync.Mutex
	js      jetstream.JetStream
	stream  jetstream.Stream

	cache *session.Cache[*entry]
}

// entry is one session in the cache, used with its lock held (see
// session.Cache).
type entry struct {
	key    string
	loaded bool
	// stale is set by Forget: records written by another process since
	// are read before the entry is used again.
	stale bool
	// last is the stream sequence of the subject's last record read (0:
	// none); the next write expects it to still be the last.
	last uint64
	// start is the sequence of the current conversation's first record, 0
	// while it has none.
	start uint64
	log   *session.Log
}

// StreamName is the sessions stream of bus.nats.prefix.
func StreamName(prefix string) string { return strings.ToUpper(prefix) + "_SESSIONS" }

// New returns a store of the sessions under cfg.Prefix reached through conn.
func New(cfg config.NATSConfig, conn natsbus.JetStreamer, opts Options, log *zap.Logger) *Store {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	newEntry := func(key string) *entry { return &entry{key: key} }
	return &Store{conn: conn, n: names{prefix: cfg.Prefix}, opts: opts, log: log,
		cache: session.NewCache(opts.CacheSize, opts.CacheBytes, newEntry, log)}
}

// names are the stream and subjects of one prefix.
type names struct{ prefix string }

func (n names) stream() string   { return StreamName(n.prefix) }
func (n names) subjects() string { return n.prefix + ".session.*" }

// subject is key's subject. Keys hold ':' and may hold '.', which a subject
// token cannot; base64url is reversible and only uses letters, digits, '-'
// and '_'.
func (n names) subject(key string) string {
	return n.prefix + ".session." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// key is the inverse of subject.
func (n names) key(subject string) (string, error) {
	tok, ok := strings.CutPrefix(subject, n.prefix+".session.")
	if !ok {
		return "", fmt.Errorf("subject %q is not a session's", subject)
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", fmt.Errorf("subject %q: %w", subject, err)
	}
	return string(b), nil
}

// setup returns the stream, creating or updating it on first use. Every
// worker runs it, so none has to start first; a failure is tried again on
// the next call.
func (s *Store) setup(ctx context.Context) (jetstream.JetStream, jetstream.Stream, error) {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	if s.stream != nil {
		return s.js, s.stream, nil
	}
	js, err := s.conn.JetStream(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Opened when it exists, created otherwise, never updated by a running
	// worker: updating a stream while another process creates a consumer
	// on it races inside the server.
	st, err := js.Stream(ctx, s.n.stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = s.create(ctx, js)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", s.n.stream(), err)
	}
	s.js, s.stream = js, st
	return js, st, nil
}

// create makes the stream; a worker that lost the race to another one
// opens the other's.
func (s *Store) create(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        s.n.stream(),
		Description: "nanobot sessions, one subject per session key, one message per write",
		Subjects:    []string{s.n.subjects()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		// A conversation is its records in order: removing one would
		// corrupt it, so single deletes are refused. Purging a subject
		// (an operator removing a whole session) stays possible.
		DenyDelete:  true,
		AllowDirect: true,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, s.n.stream())
	}
	return st, err
}

// Get returns the session for key: read from the stream on first use (an
// empty session when it has no record), from memory while cached, after
// reading what others wrote since when Forget was called.
func (s *Store) Get(key string) (session.Snapshot, error) {
	var snap session.Snapshot
	err := s.with(key, "get", func(ctx context.Context, e *entry) error {
		snap = e.log.Snapshot()
		return nil
	})
	return snap, err
}

// Append validates msgs and publishes them as one record; the returned
// snapshot holds them as they read back. A JetStream acknowledgement means
// the record is stored, so Append is durable when it returns.
//
// When another writer appended messages since this store read the session
// (a worker cut off from NATS that kept running a turn another worker took
// over), Append returns an error wrapping session.ErrConflict, having read
// the session again, and nothing of msgs is stored. Appending them anyway
// could answer one message twice, so the store does not retry: the caller
// gets the session and decides — the agent's turn fails, and its inbound
// message, if still held, is answered by the replay rule
// (docs/scale-out.md). Meta records written in between (a consolidation
// that finished on another worker) do not conflict: the messages are
// published after them.
func (s *Store) Append(key string, msgs ...llm.Message) (session.Snapshot, error) {
	return s.appendOp(key, "append", msgs)
}

// Stage is Append: a JetStream acknowledgement is already durable.
func (s *Store) Stage(key string, msgs ...llm.Message) (session.Snapshot, error) {
	return s.appendOp(key, "stage", msgs)
}

// Sync does nothing but check key: everything Stage wrote is durable.
func (s *Store) Sync(key string) error {
	return s.locked(key, "sync", func(context.Context, *entry) error { return nil })
}

func (s *Store) appendOp(key, op string, msgs []llm.Message) (session.Snapshot, error) {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return session.Snapshot{}, fmt.Errorf("session %s: %s: message %d: %w", key, op, i, err)
		}
	}
	var snap session.Snapshot
	err := s.with(key, op, func(ctx context.Context, e *entry) error {
		if len(msgs) > 0 {
			err := s.write(ctx, e, opMessages, func() ([]byte, error) { return e.log.EncodeAppend(msgs...) })
			if err != nil {
				return err
			}
		}
		snap = e.log.Snapshot()
		return nil
	})
	return snap, err
}

// SetMeta publishes a meta record with the fields of u that differ from the
// session's values; Consolidated must lie within [0, len(Messages)]. Messages
// appended in between by another writer do not conflict (the offset counts
// leading messages); another meta record or an archive does.
func (s *Store) SetMeta(key string, u session.MetaUpdate) error {
	return s.with(key, "set meta", func(ctx context.Context, e *entry) error {
		return s.write(ctx, e, opMeta, func() ([]byte, error) { return e.log.EncodeMeta(u) })
	})
}

// Archive ends the session's conversation with an archive record, so the
// next Get starts a fresh, empty one; the archived records stay in the
// stream. It returns where they are ("nats:<stream>/<subject>#<first>-<last>",
// stream sequences), or "" when the conversation had no record.
func (s *Store) Archive(key string) (string, error) {
	var where string
	err := s.with(key, "archive", func(ctx context.Context, e *entry) error {
		if e.start == 0 {
			return nil
		}
		// Encoded again on a rebase: meta records in between belong to
		// the archived conversation.
		return s.write(ctx, e, opArchive, func() ([]byte, error) {
			where = fmt.Sprintf("nats:%s/%s#%d-%d", s.n.stream(), s.n.subject(key), e.start, e.last)
			return e.log.EncodeArchive()
		})
	})
	return where, err
}

// List describes every session whose conversation has records (archived
// ones are left out), for /status and the heartbeat. Path is where the
// session is ("nats:<stream>/<subject>"), ModTime its last record's time.
func (s *Store) List() ([]session.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	_, st, err := s.setup(ctx)
	if err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(s.n.subjects()))
	if err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	var out []session.Info
	for subj := range info.State.Subjects {
		key, err := s.n.key(subj)
		if err != nil {
			s.log.Warn("ignoring a subject that is not an encoded key", zap.String("subject", subj), zap.Error(err))
			continue
		}
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // purged since
		}
		if err != nil {
			return nil, fmt.Errorf("session: list: %s: %w", key, err)
		}
		if m.Header.Get(hdrOp) == opArchive {
			continue
		}
		size, _ := strconv.ParseInt(m.Header.Get(hdrSize), 10, 64)
		out = append(out, session.Info{Key: key, Path: "nats:" + s.n.stream() + "/" + subj, Size: size, ModTime: m.Time})
	}
	return out, nil
}

// Forget makes the store read what other processes wrote to key before its
// next use of it. The loaded records stay: only the ones after them are
// read, so a worker taking a chat's message costs one request when the
// previous turn ran on it too.
func (s *Store) Forget(key string) error {
	return s.locked(key, "forget", func(_ context.Context, e *entry) error {
		e.stale = true
		return nil
	})
}

// Cached reports how many sessions are loaded in memory, for metrics.
func (s *Store) Cached() int { return s.cache.Len() }

// CachedBytes reports the weight of the loaded sessions (session.Weight).
func (s *Store) CachedBytes() int64 { return s.cache.Weight() }

// Close waits for calls in progress and drops the cache; later calls fail
// with session.ErrClosed. Every write was acknowledged when it returned, so
// nothing is lost. The connection belongs to the caller.
func (s *Store) Close() error { return s.cache.Close() }

// write publishes the record encode returns (nothing when it returns nil)
// as the subject's next record and applies it. A refusal because others
// wrote in between reads their records and, if they commute with op,
// encodes and publishes again after them; otherwise it is ErrConflict.
// Called with e's lock held and e loaded.
func (s *Store) write(ctx context.Context, e *entry, op string, encode func() ([]byte, error)) error {
	id, err := newWriteID()
	if err != nil {
		return err
	}
	for rebase := 0; ; rebase++ {
		data, err := encode()
		if err != nil || data == nil {
			return err
		}
		seq, err := s.publish(ctx, e, op, id, data)
		if err == nil {
			if err := e.applied(seq, op, data); err != nil {
				// Stored but unreadable (cannot happen with our own
				// encoding): read the subject again before the next use.
				e.loaded = false
				return err
			}
			return nil
		}
		if !isWrongLast(err) {
			// The outcome is unknown (NATS unreachable past the timeout):
			// read the subject again before the next use.
			e.stale = true
			return err
		}
		theirs, mine, err := s.catchUp(ctx, e, id)
		if err != nil {
			return err
		}
		if mine {
			return nil // an attempt whose acknowledgement was lost was stored
		}
		if !commutes(op, theirs) || rebase == maxRebase {
			return fmt.Errorf("%w (records written since: %s)", session.ErrConflict, strings.Join(theirs, ", "))
		}
		s.log.Debug("session written by another process; writing after its records",
			zap.String("session", e.key), zap.Strings("records", theirs))
	}
}

// commutes reports whether a write of op may go after records of the kinds
// in theirs that it was not based on. Messages and meta records commute: a
// consolidation offset counts leading messages, and appended messages do
// not move it. Two appends of messages do not (the same turn may have run
// on two workers), nor two meta records (two consolidations), nor anything
// and an archive (it changes which conversation the write belongs to).
func commutes(op string, theirs []string) bool {
	for _, t := range theirs {
		switch {
		case op == opMessages && t == opMeta, op == opMeta && t == opMessages, op == opArchive && t == opMeta:
		default:
			return false
		}
	}
	return true
}

// publish sends data as the record after e.last, retrying while NATS is
// unreachable (within ctx), and returns its stream sequence.
func (s *Store) publish(ctx context.Context, e *entry, op, id string, data []byte) (uint64, error) {
	js, _, err := s.setup(ctx)
	if err != nil {
		return 0, err
	}
	msg := nats.NewMsg(s.n.subject(e.key))
	msg.Data = data
	msg.Header.Set(hdrOp, op)
	msg.Header.Set(hdrID, id)
	size := e.log.Snapshot().Size + int64(len(data))
	switch {
	case op == opArchive:
		msg.Header.Set(hdrStart, strconv.FormatUint(e.start, 10))
		size = 0
	case e.start != 0:
		msg.Header.Set(hdrStart, strconv.FormatUint(e.start, 10))
	}
	msg.Header.Set(hdrSize, strconv.FormatInt(size, 10))
	for {
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithExpectStream(s.n.stream()), jetstream.WithExpectLastSequencePerSubject(e.last))
		if err == nil {
			return ack.Sequence, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || ctx.Err() != nil {
			return 0, err
		}
		// Not connected, no stream responding, timeout: the same write
		// again. If the first attempt was stored, the retry is refused as
		// a wrong last sequence and catchUp recognises it by its id.
		select {
		case <-ctx.Done():
			return 0, errors.Join(err, ctx.Err())
		case <-time.After(retryWait):
		}
	}
}

// isWrongLast reports whether err is JetStream refusing a publish because
// the subject's last sequence is not the expected one.
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func newWriteID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("write id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// with runs fn on key's entry, loaded and up to date, with its lock held.
func (s *Store) with(key, op string, fn func(context.Context, *entry) error) error {
	return s.locked(key, op, func(ctx context.Context, e *entry) error {
		switch {
		case !e.loaded:
			if err := s.load(ctx, e); err != nil {
				return err
			}
		case e.stale:
			if _, _, err := s.catchUp(ctx, e, ""); err != nil {
				return err
			}
		}
		return fn(ctx, e)
	})
}

// locked runs fn on the entry for key, loaded or not, with its lock held,
// and wraps any error with the key and op.
func (s *Store) locked(key, op string, fn func(context.Context, *entry) error) error {
	if err := session.CheckKey(key); err != nil {
		return fmt.Errorf("session %q: %s: %w", key, op, err)
	}
	err := s.cache.Use(key, func(e *entry) error {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		return fn(ctx, e)
	})
	if err != nil {
		return fmt.Errorf("session %s: %s: %w", key, op, err)
	}
	return nil
}

// Weight is e's session.Weight as loaded now (nothing when not loaded).
func (e *entry) Weight() int64 {
	if !e.loaded || e.log == nil {
		return 0
	}
	snap := e.log.Snapshot()
	return session.Weight(snap.Size, len(snap.Messages))
}

// Drop does nothing: an entry holds nothing but memory.
func (e *entry) Drop() error { return nil }
