// Package draftkv keeps the channel manager's draft record
// (channels.DraftRecord: which platform messages show each turn's streamed
// draft) in a NATS JetStream KV bucket, <PREFIX>_DRAFTS, so that a channels
// process of a scaled-out deployment (docs/scale-out.md) killed in the middle
// of a streamed answer edits the rest of it into the draft already on screen
// after its restart, instead of sending the answer again beside it.
//
// Layout: one key per turn, "<channel>.<turn id>", whose value is the JSON
// list of the draft's messages ({"ChatID", "MessageID"}). A turn is written
// by one channels process at a time, so a save simply replaces the value.
// Entries expire after TTL: a record is read only by a restart during its
// turn, or by its final delivered again shortly after.
//
// Only the daemon constructs a Store; it imports internal/config (and the
// channels package imports nothing of it: it declares the interface).
package draftkv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
)

// TTL is how long a turn's record is kept after its last change: far
// longer than a turn, and a restart, take.
const TTL = 24 * time.Hour

// BucketName is the KV bucket of bus.nats.prefix.
func BucketName(prefix string) string { return strings.ToUpper(prefix) + "_DRAFTS" }

// Store is the draft record in the bucket <PREFIX>_DRAFTS. It implements
// channels.DraftRecord, is safe for concurrent use and needs no goroutine.
type Store struct {
	conn   natsbus.JetStreamer
	bucket string

	mu sync.Mutex // guards kv
	kv jetstream.KeyValue
}

var _ channels.DraftRecord = (*Store)(nil)

// New returns the record in the bucket of cfg.Prefix reached through conn.
// It does no I/O.
func New(cfg config.NATSConfig, conn natsbus.JetStreamer) *Store {
	return &Store{conn: conn, bucket: BucketName(cfg.Prefix)}
}

// Remember stores turn's draft messages; none deletes its record.
func (s *Store) Remember(ctx context.Context, channel, turn string, refs []channels.Sent) error {
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	k := key(channel, turn)
	if len(refs) == 0 {
		if err := kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("drafts: delete %s: %w", k, err)
		}
		return nil
	}
	data, err := json.Marshal(refs)
	if err != nil {
		return fmt.Errorf("drafts: encode %s: %w", k, err)
	}
	if _, err := kv.Put(ctx, k, data); err != nil {
		return fmt.Errorf("drafts: put %s: %w", k, err)
	}
	return nil
}

// Recall returns turn's draft messages, none when it has no record.
func (s *Store) Recall(ctx context.Context, channel, turn string) ([]channels.Sent, error) {
	kv, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	k := key(channel, turn)
	e, err := kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("drafts: get %s: %w", k, err)
	}
	var refs []channels.Sent
	if err := json.Unmarshal(e.Value(), &refs); err != nil {
		return nil, fmt.Errorf("drafts: decode %s: %w", k, err)
	}
	return refs, nil
}

// open returns the bucket, creating it on first use.
func (s *Store) open(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	js, err := s.conn.JetStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("drafts: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      s.bucket,
		Description: "nanobot draft record: the platform messages showing each turn's streamed draft, one key per turn",
		TTL:         TTL,
		// On disk: the record must outlive a NATS restart during a turn
		// as well as the channels process's.
		Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("drafts: open bucket %s: %w", s.bucket, err)
	}
	s.kv = kv
	return kv, nil
}

// key is the record's key: KV keys take letters, digits, "-", "_", "=",
// "/" and "."; a turn id (hex) is kept as it is, anything else hashed.
func key(channel, turn string) string {
	if strings.IndexFunc(turn, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		h := sha256.Sum256([]byte(turn))
		turn = hex.EncodeToString(h[:16])
	}
	return channel + "." + turn
}
