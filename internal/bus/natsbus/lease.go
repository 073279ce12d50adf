package natsbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
)

// releaseWait bounds the deletion of a lease at shutdown: past it the
// successor waits for the lease to expire instead.
const releaseWait = 2 * time.Second

// Lease elects one process among those that run it: the holder of key in
// the KV bucket <PREFIX>_LEASE. The bucket's TTL is the lease's: the holder
// renews the key every third of it with an update on the revision it last
// wrote, so a holder that dies (or is cut off) loses the key when it
// expires and another process creates it. Create it with Bus.Lease.
type Lease struct {
	// js is the JetStream context, once the bus is connected.
	js     func(ctx context.Context) (jetstream.JetStream, error)
	bucket string
	key    string
	holder string
	ttl    time.Duration
	log    *zap.Logger

	leading atomic.Bool
}

// SchedulerLease is the lease whose holder runs cron and the heartbeat.
const SchedulerLease = "scheduler"

// LeaseHolder returns who holds lease key, "" when nobody does (or the
// bucket does not exist yet), for nanobot doctor.
func LeaseHolder(ctx context.Context, nc *nats.Conn, cfg config.NATSConfig, key string) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	kv, err := js.KeyValue(ctx, names{prefix: cfg.Prefix}.leaseBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease bucket: %w", err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease %s: %w", key, err)
	}
	return string(e.Value()), nil
}

// Lease returns the lease named key on this bus's NATS, expiring ttl after
// its holder's last renewal. It does no I/O; Run does.
func (b *Bus) Lease(key string, ttl time.Duration) *Lease {
	return &Lease{
		js: func(ctx context.Context) (jetstream.JetStream, error) {
			if err := b.wait(ctx); err != nil {
				return nil, err
			}
			return b.js, nil
		},
		bucket: b.n.leaseBucket(), key: key, holder: holderID(b.opts.Name), ttl: ttl,
		log: b.log.With(zap.String("lease", key)),
	}
}

// holderID names this process in the lease's value, for whoever looks at
// the bucket: the connection's name, host and pid, and a random part that
// tells two runs of one pid apart.
func holderID(name string) string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s@%s:%d/%s", name, host, os.Getpid(), hex.EncodeToString(r[:]))
}

// Leading reports whether this process holds the lease now (metrics).
func (l *Lease) Leading() bool { return l.leading.Load() }

// Run competes for the lease until ctx ends and runs lead while it holds
// it. lead's context ends as soon as the lease is lost — a renewal refused
// because the key changed, or none confirmed for two thirds of the TTL, so
// lead stops before another process can take over — and Run waits for lead
// to return before it competes again. When ctx ends, Run stops lead, then
// deletes the key (if it still holds it) so that a successor takes over at
// once. If lead returns by itself, Run releases the lease and returns lead's
// error.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	js, err := l.js(ctx)
	if err != nil {
		return nil // ended before the bus was connected
	}
	// NATS may not be up yet: the bucket is opened until it is.
	var kv jetstream.KeyValue
	err = Retry(ctx, time.Second, func(err error) {
		l.log.Warn("nats: cannot set up the lease bucket yet; retrying", zap.String("bucket", l.bucket), zap.Error(err))
	}, func() (err error) {
		kv, err = l.openBucket(ctx, js)
		return err
	})
	if err != nil {
		return nil // ended while NATS was unreachable
	}
	for {
		rev, err := l.acquire(ctx, kv)
		if err != nil {
			return nil // ctx ended
		}
		done, err := l.hold(ctx, kv, rev, lead)
		if done || ctx.Err() != nil {
			return err
		}
	}
}

// openBucket opens the bucket once. It updates the bucket only when its TTL
// is not the configured one: every contender runs this at start, and an
// update is a change of the stream under the others' watches.
func (l *Lease) openBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      l.bucket,
		Description: "nanobot leases: which process runs cron and the heartbeat",
		TTL:         l.ttl,
		// On disk: a NATS restart must not free a lease that is held.
		Storage: jetstream.FileStorage,
	}
	kv, err := js.KeyValue(ctx, l.bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.KeyValue(ctx, l.bucket) // another process was first
		}
		return kv, err
	case err != nil:
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.TTL() == l.ttl {
		return kv, nil
	}
	l.log.Info("setting the lease bucket's TTL", zap.Duration("was", st.TTL()), zap.Duration("ttl", l.ttl))
	return js.UpdateKeyValue(ctx, cfg)
}

// acquire creates the key, waiting while another process holds it, and
// returns its revision; it fails only when ctx ends. A release (deletion)
// is seen on a watch of the key and answered at once; an expiry is not
// announced, so it also tries every third of the TTL.
func (l *Lease) acquire(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	var updates <-chan jetstream.KeyValueEntry
	if w, err := kv.Watch(ctx, l.key, jetstream.UpdatesOnly()); err == nil {
		defer func() { _ = w.Stop() }()
		updates = w.Updates()
	}
	for {
		rev, err := kv.Create(ctx, l.key, []byte(l.holder))
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() == nil {
			l.log.Debug("cannot take the lease; trying again", zap.Error(err))
		}
		t := time.NewTimer(l.ttl / 3)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		case _, ok := <-updates:
			t.Stop()
			if !ok {
				updates = nil // the watch ended; the timer still ticks
			}
		}
	}
}

// hold runs lead while renewing the lease at rev. It returns when the
// lease is lost (done false: compete again) or when ctx ended or lead
// returned (done true, with lead's error); lead has returned either way.
func (l *Lease) hold(ctx context.Context, kv jetstream.KeyValue, rev uint64, lead func(context.Context) error) (done bool, err error) {
	l.log.Info(l.key+" lease acquired", zap.String("holder", l.holder), zap.Duration("ttl", l.ttl))
	l.leading.Store(true)
	defer l.leading.Store(false)
	leadCtx, stopLead := context.WithCancel(ctx)
	defer stopLead()
	ended := make(chan error, 1)
	go func() { ended <- lead(leadCtx) }()

	renew := time.NewTicker(l.ttl / 3)
	defer renew.Stop()
	// renewed is when the last confirmed write was sent: the server wrote
	// it later, so the lease lasts at least until renewed + ttl.
	renewed := time.Now()
	for {
		select {
		case err := <-ended:
			l.release(kv, rev)
			if err != nil {
				return true, fmt.Errorf("%s lease holder: %w", l.key, err)
			}
			return true, nil
		case <-ctx.Done():
			stopLead()
			err := <-ended
			l.release(kv, rev)
			return true, err
		case <-renew.C:
		}
		// Stop a third of the TTL before the lease may expire: past that,
		// another process may hold it.
		deadline := renewed.Add(l.ttl * 2 / 3)
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		next, err := kv.Update(rctx, l.key, []byte(l.holder), rev)
		cancel()
		switch {
		case err == nil:
			rev, renewed = next, sent
			continue
		case ctx.Err() != nil:
			continue // shutdown: handled above
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			if r, ok := l.ownWrite(ctx, kv, deadline); ok {
				rev = r // a renewal whose answer was lost: still ours
				continue
			}
			err = fmt.Errorf("taken over or expired: %w", err)
		case time.Now().Before(deadline):
			l.log.Warn("cannot renew the lease; trying again", zap.Error(err))
			continue
		}
		stopLead()
		stopped := <-ended // what it returned once stopped, if anything
		l.log.Warn(l.key+" lease lost; stopped what it runs", zap.NamedError("reason", err), zap.NamedError("stopped", stopped))
		return false, nil
	}
}

// ownWrite reports whether the key's latest value is still this holder's,
// and its revision: a renewal the server stored but whose answer was lost
// left a revision this process never saw. The holder id is unique to this
// run of the process, so nobody else writes that value.
func (l *Lease) ownWrite(ctx context.Context, kv jetstream.KeyValue, deadline time.Time) (uint64, bool) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	e, err := kv.Get(ctx, l.key)
	if err != nil || string(e.Value()) != l.holder {
		return 0, false
	}
	return e.Revision(), true
}

// release deletes the key if it still holds rev, so that another process
// takes over at once rather than when it expires.
func (l *Lease) release(kv jetstream.KeyValue, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	if err := kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
		l.log.Warn("cannot release the lease; another process takes over once it expires", zap.Error(err))
		return
	}
	l.log.Info(l.key + " lease released")
}
