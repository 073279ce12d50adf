package pairingkv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// retryWait is the pause before opening the bucket or watching it again
// after a failure: NATS may not be up yet, or restarting.
const retryWait = time.Second

// Run opens the bucket (creating it if needed), imports the pairing file
// once, and keeps the in-memory view current with a watch of the whole
// bucket until ctx ends. The store's methods work from the moment the
// watch delivered the bucket's content. Run returns nil when ctx ends; a
// watch that breaks (NATS restarting) is started again.
func (s *Store) Run(ctx context.Context) error {
	defer close(s.stopped)
	js, err := s.conn.JetStream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("pairing: %w", err)
	}
	var kv jetstream.KeyValue
	err = natsbus.Retry(ctx, retryWait, func(err error) {
		s.log.Warn("nats: cannot open the pairing bucket yet; retrying", zap.String("bucket", s.bucket), zap.Error(err))
	}, func() (err error) {
		kv, err = s.open(ctx, js)
		return err
	})
	if err != nil {
		return nil // ctx ended while NATS was unreachable
	}
	if err := s.importFile(ctx, kv); err != nil && ctx.Err() == nil {
		// Not fatal: the approvals in KV still work; the import is tried
		// again at the next start, as the bucket is not marked imported.
		s.log.Error("cannot import the pairing file into KV; its approvals are missing until the next start",
			zap.String("file", s.opts.ImportFile), zap.Error(err))
	}
	s.kv = kv // read by the methods only after ready is closed
	for {
		err := s.watch(ctx, kv)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("pairing watch ended; watching again", zap.String("bucket", s.bucket), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryWait):
		}
	}
}

// open opens the bucket, creating it when missing. An existing bucket is
// not updated: every process opens it at start.
func (s *Store) open(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, s.bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      s.bucket,
		Description: "nanobot pairing: pending codes and approved senders, one key per channel and sender",
		// On disk: a NATS restart must not forget who was let in.
		Storage: jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, s.bucket) // another process was first
	}
	return kv, err
}

// watch applies every value of the bucket to the view, first the current
// ones (then the store is ready), then every change, until ctx ends or the
// watch breaks.
func (s *Store) watch(ctx context.Context, kv jetstream.KeyValue) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch %s: closed", s.bucket)
			}
			if e == nil { // the current values are all in
				s.readyOnce.Do(func() { close(s.ready) })
				continue
			}
			if !strings.HasPrefix(e.Key(), userPrefix) {
				continue
			}
			var value []byte
			if e.Operation() == jetstream.KeyValuePut {
				value = e.Value()
			}
			s.apply(e.Key(), e.Revision(), value)
		}
	}
}

// importFile copies the file store's entries into the bucket once: when
// the bucket has no import mark and the file has entries. A key that
// already exists (an approval made through KV) wins over the file. The mark
// is written only after an import, so a process whose data dir has no
// pairing file (the CLI on another host, an agent worker) does not keep the
// channels process from importing its own.
func (s *Store) importFile(ctx context.Context, kv jetstream.KeyValue) error {
	if s.opts.ImportFile == "" {
		return nil
	}
	if _, err := kv.Get(ctx, importedKey); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("get %s: %w", importedKey, err)
	}
	file := channels.NewPairingStore(s.opts.ImportFile)
	file.TTL, file.Clock = s.opts.TTL, s.opts.Clock
	st, err := file.List() // valid codes only
	if err != nil {
		return err
	}
	if len(st.Pending) == 0 && len(st.Approved) == 0 {
		return nil
	}
	records := map[string]*record{}
	at := func(channel, sender string) *record {
		k := userKey(channel, sender)
		if records[k] == nil {
			records[k] = &record{}
		}
		return records[k]
	}
	for _, p := range st.Pending {
		at(p.Channel, p.SenderID).Pending = &p
	}
	for _, a := range st.Approved {
		at(a.Channel, a.SenderID).Approved = &a
	}
	imported := 0
	for k, r := range records {
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		switch _, err := kv.Create(ctx, k, data); {
		case err == nil:
			imported++
		case errors.Is(err, jetstream.ErrKeyExists):
		default:
			return fmt.Errorf("create %s: %w", k, err)
		}
	}
	mark := fmt.Sprintf(`{"file":%q,"at":%q}`, s.opts.ImportFile, s.opts.Clock.Now().UTC().Format(time.RFC3339))
	if _, err := kv.Create(ctx, importedKey, []byte(mark)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create %s: %w", importedKey, err)
	}
	s.log.Info("imported the pairing file into KV", zap.String("file", s.opts.ImportFile), zap.String("bucket", s.bucket),
		zap.Int("pending", len(st.Pending)), zap.Int("approved", len(st.Approved)), zap.Int("senders_written", imported))
	return nil
}
