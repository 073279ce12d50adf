package cursorkv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/config"
)

// retryWait is the pause before trying to load again: NATS may not be up
// yet, or restarting.
const retryWait = time.Second

// BucketName is the KV bucket of bus.nats.prefix.
func BucketName(prefix string) string { return strings.ToUpper(prefix) + "_CURSORS" }

// Options configure a Store.
type Options struct {
	// Key is the channel's key in the bucket, e.g. "discord".
	Key string
	// ImportFile is the file the channel kept its cursors in (the data
	// dir's discord-cursors.json). Load imports it when the bucket has no
	// value yet; "" imports nothing.
	ImportFile string
}

// Store is one channel's cursors document in the bucket <PREFIX>_CURSORS.
// It implements discord.CursorStore; it is safe for concurrent use, and
// needs no goroutine of its own.
type Store struct {
	conn   natsbus.JetStreamer
	bucket string
	opts   Options
	log    *zap.Logger

	mu sync.Mutex // one Load or Save at a time; guards the fields below
	kv jetstream.KeyValue
	// rev is the key's revision this store last read or wrote; 0 while the
	// key has no value (Save then creates it).
	rev uint64
	// unsure is the value of the last save that failed without an answer
	// (NATS restarting): it may have been stored after all, which explains
	// a revision mismatch on the next save.
	unsure []byte
}

// New returns the store of opts.Key in the bucket of cfg.Prefix reached
// through conn. It does no I/O.
func New(cfg config.NATSConfig, conn natsbus.JetStreamer, opts Options, log *zap.Logger) *Store {
	return &Store{conn: conn, bucket: BucketName(cfg.Prefix), opts: opts, log: log}
}

// String names the key in logs.
func (s *Store) String() string { return "nats:" + s.bucket + "/" + s.opts.Key }

// Load returns the document in the bucket, importing ImportFile first when
// the bucket has none. It retries until NATS answers or ctx ends: cursors
// not loaded would be overwritten by the next save.
func (s *Store) Load(ctx context.Context) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var data []byte
	var found bool
	err := natsbus.Retry(ctx, retryWait, func(err error) {
		s.log.Warn("cannot load the cursors from KV yet; retrying", zap.Stringer("key", s), zap.Error(err))
	}, func() (err error) {
		data, found, err = s.load(ctx)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("load %s: %w", s, ctx.Err())
	}
	return data, found, nil
}

func (s *Store) load(ctx context.Context) ([]byte, bool, error) {
	kv, err := s.open(ctx)
	if err != nil {
		return nil, false, err
	}
	e, err := kv.Get(ctx, s.opts.Key)
	switch {
	case err == nil:
		s.rev = e.Revision()
		return e.Value(), true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s.rev = 0
		return s.importFile(ctx, kv)
	default:
		return nil, false, fmt.Errorf("get %s: %w", s, err)
	}
}

// importFile copies ImportFile into the key, which has no value, and
// returns what it copied. A corrupt file is not imported: the channel
// would set it aside anyway.
func (s *Store) importFile(ctx context.Context, kv jetstream.KeyValue) ([]byte, bool, error) {
	if s.opts.ImportFile == "" {
		return nil, false, nil
	}
	data, err := os.ReadFile(s.opts.ImportFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("import %s: %w", s.opts.ImportFile, err)
	}
	if !json.Valid(data) {
		s.log.Error("cursor file is corrupt; not imported into KV", zap.String("file", s.opts.ImportFile), zap.Stringer("key", s))
		return nil, false, nil
	}
	rev, err := kv.Create(ctx, s.opts.Key, data)
	if err != nil {
		// ErrKeyExists included: another process wrote it meanwhile, and
		// the retry reads its value.
		return nil, false, fmt.Errorf("import %s into %s: %w", s.opts.ImportFile, s, err)
	}
	s.rev = rev
	s.log.Info("imported the cursor file into KV", zap.String("file", s.opts.ImportFile), zap.Stringer("key", s), zap.Int("bytes", len(data)))
	return data, true, nil
}

// Save replaces the document. An error is returned for the caller to log
// and retry with its next change; nothing is retried here.
func (s *Store) Save(ctx context.Context, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	rev, err := s.write(ctx, kv, data, s.rev)
	if isMismatch(err) {
		rev, err = s.resolve(ctx, kv, data)
	}
	if err != nil {
		if !isMismatch(err) {
			s.unsure = data
		}
		return fmt.Errorf("save %s: %w", s, err)
	}
	s.rev, s.unsure = rev, nil
	return nil
}

// write creates the key when rev is 0, or updates it on rev.
func (s *Store) write(ctx context.Context, kv jetstream.KeyValue, data []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return kv.Create(ctx, s.opts.Key, data)
	}
	return kv.Update(ctx, s.opts.Key, data, rev)
}

// resolve handles a revision mismatch. When the value stored is this
// store's own unanswered save, it updates on top of it. Otherwise another
// process wrote the key — two channels processes run at once, each losing
// the other's cursors — which is reported loudly; this process's cursors
// are then written over it, as the file would have been.
func (s *Store) resolve(ctx context.Context, kv jetstream.KeyValue, data []byte) (uint64, error) {
	e, err := kv.Get(ctx, s.opts.Key)
	switch {
	case err == nil && s.unsure != nil && bytes.Equal(e.Value(), s.unsure):
		return kv.Update(ctx, s.opts.Key, data, e.Revision())
	case err == nil:
		s.log.Error("the cursors in KV were changed by another process: are two channels processes running? "+
			"Run exactly one; each overwrites the other's cursors, and messages may be answered twice or missed",
			zap.Stringer("key", s), zap.Uint64("expected_revision", s.rev), zap.Uint64("found_revision", e.Revision()))
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s.log.Error("the cursors in KV were deleted by someone else; writing them again", zap.Stringer("key", s))
	default:
		return 0, fmt.Errorf("get %s: %w", s, err)
	}
	return kv.Put(ctx, s.opts.Key, data)
}

func isMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// open opens the bucket, creating it when missing; once opened it is kept.
// Callers hold mu.
func (s *Store) open(ctx context.Context) (jetstream.KeyValue, error) {
	if s.kv != nil {
		return s.kv, nil
	}
	js, err := s.conn.JetStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("cursors: %w", err)
	}
	kv, err := js.KeyValue(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      s.bucket,
			Description: "nanobot channel cursors: which messages of each chat were handled, one key per channel",
			// On disk: a NATS restart must not make the bot forget what
			// it answered, nor what it still has to catch up.
			Storage: jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, s.bucket) // another process was first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", s.bucket, err)
	}
	s.kv = kv
	return kv, nil
}
