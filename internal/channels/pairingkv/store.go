package pairingkv

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// ErrClosed is returned by a store whose Run has returned: it no longer
// knows the bucket's content. The caller should not retry on this store.
var ErrClosed = errors.New("pairing store: not running")

// Options configure a Store.
type Options struct {
	// TTL is how long a code stays valid [1h]; MaxPending caps pending
	// codes [64], the oldest dropped first — the file store's rules.
	TTL        time.Duration
	MaxPending int
	// Clock is the time codes expire by [clock.System].
	Clock clock.Clock
	// ImportFile is the file store's path (the data dir's pairing.json).
	// Run imports its entries once into the bucket, so switching a
	// deployment to NATS keeps its approvals; "" imports nothing.
	ImportFile string
	// Timeout bounds one operation, waiting for the first load of the
	// bucket and for NATS included [30s].
	Timeout time.Duration
}

const (
	defaultTTL        = time.Hour
	defaultMaxPending = 64
	defaultTimeout    = 30 * time.Second
	// maxAttempts bounds how often one change is computed again after
	// another process changed its key: only a storm of writes to one
	// sender reaches it.
	maxAttempts = 32
	// importedKey marks the bucket as holding the file store's entries.
	importedKey = "meta.imported"
	userPrefix  = "u."
)

// BucketName is the KV bucket of bus.nats.prefix.
func BucketName(prefix string) string { return strings.ToUpper(prefix) + "_PAIRING" }

// record is one sender's value: the pending code and the approval, each
// optional, as the file store keeps them in its two lists. A record with
// neither is no entry at all.
type record struct {
	Pending  *channels.PairingRequest `json:"pending,omitempty"`
	Approved *channels.Approval       `json:"approved,omitempty"`
}

func (r record) empty() bool { return r.Pending == nil && r.Approved == nil }

// entry is one key of the in-memory view at the revision it was read.
type entry struct {
	rev uint64
	rec record
}

// Store is a channels.Pairing over the KV bucket <PREFIX>_PAIRING. Build it
// with New and run Run (its watch keeps the in-memory view current); the
// methods wait, up to Options.Timeout, for Run's first load of the bucket.
// It is safe for concurrent use.
type Store struct {
	conn   natsbus.JetStreamer
	bucket string
	opts   Options
	log    *zap.Logger

	// ready is closed once kv is set and the view holds the bucket's
	// content; stopped once Run returned.
	ready     chan struct{}
	readyOnce sync.Once
	stopped   chan struct{}
	kv        jetstream.KeyValue

	mu   sync.Mutex
	view map[string]entry
}

var _ channels.Pairing = (*Store)(nil)

// New returns a store of the bucket of cfg.Prefix reached through conn. It
// does no I/O; Run does.
func New(cfg config.NATSConfig, conn natsbus.JetStreamer, opts Options, log *zap.Logger) *Store {
	if opts.TTL <= 0 {
		opts.TTL = defaultTTL
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = defaultMaxPending
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	return &Store{conn: conn, bucket: BucketName(cfg.Prefix), opts: opts, log: log,
		ready: make(chan struct{}), stopped: make(chan struct{}), view: make(map[string]entry)}
}

// userKey is the key of sender on channel. Ids may hold any character and
// a KV key only [-/_=.a-zA-Z0-9], hence base64url; the NUL keeps
// ("a", "bc") and ("ab", "c") apart.
func userKey(channel, senderID string) string {
	return userPrefix + base64.RawURLEncoding.EncodeToString([]byte(channel+"\x00"+senderID))
}

// Request returns a pairing code for sender on channel: the pending one if
// it is still valid, otherwise a new one. Past MaxPending the oldest codes
// are dropped.
func (s *Store) Request(channel, senderID, senderName, chatID string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	var code string
	err := s.change(ctx, userKey(channel, senderID), func(r *record) (bool, error) {
		if r.Pending != nil {
			code = r.Pending.Code
			return false, nil
		}
		c, err := channels.NewPairingCode()
		if err != nil {
			return false, err
		}
		code = c
		r.Pending = &channels.PairingRequest{Code: c, Channel: channel, SenderID: senderID,
			SenderName: senderName, ChatID: chatID, Created: s.opts.Clock.Now().UTC()}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("pairing: request code: %w", err)
	}
	s.tidy(ctx)
	return code, nil
}

// tidy drops the oldest codes past MaxPending, and expired ones, from the
// bucket, as the file store does on every write. It is best effort: a code
// it fails to drop is dropped by a later request, and expired codes are
// never shown or accepted anyway.
func (s *Store) tidy(ctx context.Context) {
	type pend struct {
		key string
		p   channels.PairingRequest
	}
	var valid, expired []pend
	s.mu.Lock()
	for k, e := range s.view {
		if p := e.rec.Pending; p != nil {
			if s.expired(*p) {
				expired = append(expired, pend{k, *p})
			} else {
				valid = append(valid, pend{k, *p})
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(valid, func(a, b pend) int { return comparePending(a.p, b.p) })
	drop := expired
	if over := len(valid) - s.opts.MaxPending; over > 0 {
		drop = append(drop, valid[:over]...)
	}
	for _, d := range drop {
		err := s.change(ctx, d.key, func(r *record) (bool, error) {
			// change already dropped it if it expired; drop it unless the
			// sender got a new code meanwhile.
			if r.Pending == nil || r.Pending.Code != d.p.Code {
				return false, nil
			}
			r.Pending = nil
			return true, nil
		})
		if err != nil {
			s.log.Warn("cannot drop an old pairing code; a later request retries", zap.String("code", d.p.Code), zap.Error(err))
		}
	}
}

// Approve lets the sender who was given code in.
func (s *Store) Approve(code string) (channels.Approval, error) {
	code = channels.NormalizePairingCode(code)
	var a channels.Approval
	err := s.onCode(code, func(r *record) (bool, error) {
		p := r.Pending
		a = p.Approval(s.opts.Clock.Now())
		r.Pending, r.Approved = nil, &a
		return true, nil
	})
	if err != nil {
		return channels.Approval{}, fmt.Errorf("pairing: approve %s: %w", code, err)
	}
	return a, nil
}

// Deny drops a pending code without letting its sender in; the sender can
// ask again later and gets a new code.
func (s *Store) Deny(code string) (channels.PairingRequest, error) {
	code = channels.NormalizePairingCode(code)
	var p channels.PairingRequest
	err := s.onCode(code, func(r *record) (bool, error) {
		p, r.Pending = *r.Pending, nil
		return true, nil
	})
	if err != nil {
		return channels.PairingRequest{}, fmt.Errorf("pairing: deny %s: %w", code, err)
	}
	return p, nil
}

// onCode applies fn to the record whose valid pending code is code, or
// fails with channels.ErrUnknownCode. The code is looked up in the view
// (the CLI's view is loaded before it runs; a code is issued by the
// channels process and reaches every view within a round trip), and checked
// again on the key's current value: of two processes approving or denying
// one code at once, one succeeds and the other gets ErrUnknownCode.
func (s *Store) onCode(code string, fn func(*record) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	if err := s.wait(ctx); err != nil {
		return err
	}
	key, ok := s.keyOfCode(code)
	if !ok {
		return channels.ErrUnknownCode
	}
	return s.change(ctx, key, func(r *record) (bool, error) {
		if r.Pending == nil || r.Pending.Code != code {
			return false, channels.ErrUnknownCode
		}
		return fn(r)
	})
}

func (s *Store) keyOfCode(code string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.view {
		if p := e.rec.Pending; p != nil && p.Code == code && !s.expired(*p) {
			return k, true
		}
	}
	return "", false
}

// Revoke removes an approval; it reports whether there was one.
func (s *Store) Revoke(channel, senderID string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	found := false
	err := s.change(ctx, userKey(channel, senderID), func(r *record) (bool, error) {
		found = r.Approved != nil
		r.Approved = nil
		return found, nil
	})
	if err != nil {
		return false, fmt.Errorf("pairing: revoke %s:%s: %w", channel, senderID, err)
	}
	return found, nil
}

// List returns the valid pending codes, oldest first, and the approvals in
// the order they were made, from the view.
func (s *Store) List() (channels.PairingState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	if err := s.wait(ctx); err != nil {
		return channels.PairingState{}, fmt.Errorf("pairing: list: %w", err)
	}
	var st channels.PairingState
	s.mu.Lock()
	for _, e := range s.view {
		if p := e.rec.Pending; p != nil && !s.expired(*p) {
			st.Pending = append(st.Pending, *p)
		}
		if a := e.rec.Approved; a != nil {
			st.Approved = append(st.Approved, *a)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(st.Pending, comparePending)
	slices.SortFunc(st.Approved, func(a, b channels.Approval) int {
		return cmp.Or(a.ApprovedAt.Compare(b.ApprovedAt), cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.SenderID, b.SenderID))
	})
	return st, nil
}

// IsApproved reports whether sender was approved on channel, from the view:
// no NATS round trip per message.
func (s *Store) IsApproved(channel, senderID string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	if err := s.wait(ctx); err != nil {
		return false, fmt.Errorf("pairing: check %s:%s: %w", channel, senderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view[userKey(channel, senderID)].rec.Approved != nil, nil
}

func comparePending(a, b channels.PairingRequest) int {
	return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Code, b.Code))
}

func (s *Store) expired(p channels.PairingRequest) bool {
	return p.Created.Before(s.opts.Clock.Now().Add(-s.opts.TTL))
}

// wait blocks until Run has loaded the bucket.
func (s *Store) wait(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	default:
	}
	select {
	case <-s.ready:
		return nil
	case <-s.stopped:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("bucket not loaded yet (is NATS reachable?): %w", ctx.Err())
	}
}

// change applies fn to the current value of key and writes the result on
// the revision it read; when another process wrote the key in between, the
// write is refused and fn runs again on the new value. fn reports whether it
// changed the record; an expired code is dropped before fn sees it. The
// result is in this store's view at once.
func (s *Store) change(ctx context.Context, key string, fn func(*record) (bool, error)) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	for range maxAttempts {
		var r record
		var rev uint64
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("get %s: %w", key, err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return fmt.Errorf("%s/%s: %w", s.bucket, key, err)
			}
		}
		expiredCode := r.Pending != nil && s.expired(*r.Pending)
		if expiredCode {
			r.Pending = nil
		}
		changed, err := fn(&r)
		if err != nil {
			return err
		}
		if !changed && !expiredCode {
			return nil
		}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if r.empty() {
			// Kept as an empty record rather than deleted: an update
			// returns the revision for the view, a delete does not.
			data = []byte("{}")
		}
		var next uint64
		if rev == 0 {
			next, err = s.kv.Create(ctx, key, data)
		} else {
			next, err = s.kv.Update(ctx, key, data, rev)
		}
		switch {
		case err == nil:
			s.apply(key, next, data)
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another process wrote the key: compute again
		default:
			return fmt.Errorf("write %s: %w", key, err)
		}
	}
	return fmt.Errorf("write %s: changed by others %d times in a row", key, maxAttempts)
}

// apply puts a value of key read at rev into the view, unless the view
// already holds that revision or a later one (this store's own write can
// arrive before the watch delivers it, and the watch delivers it again).
func (s *Store) apply(key string, rev uint64, value []byte) {
	var r record
	if len(value) > 0 {
		if err := json.Unmarshal(value, &r); err != nil {
			s.log.Warn("unreadable pairing entry; treated as empty", zap.String("key", key), zap.Error(err))
			r = record{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.view[key]; ok && cur.rev >= rev {
		return
	}
	s.view[key] = entry{rev: rev, rec: r}
}
