// Package usagejs puts one usage ledger behind every process of the NATS
// bus (docs/scale-out.md, docs/usage.md#on-the-nats-bus): each process
// publishes the records of its own model calls to the JetStream stream
// <PREFIX>_USAGE and reads everyone's back into its local ledger, so
// /usage, the panel, the CLI and the budgets of any process see the calls
// of all of them.
//
// A record is published (and acknowledged by the server) before it is
// counted locally, so a budget checked on another worker sees it as soon as
// that worker's consumer delivers it; the process that made the call
// counts it at once. Each process remembers how far it has read
// (usage-nats-seq beside its ledger, saved every second and at shutdown);
// after a crash it reads again from there and skips the records its ledger
// already holds (Ledger.HasSeq). The stream keeps records for the ledger's
// retention; a process that starts with an empty ledger reads what the
// stream still holds.
package usagejs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// StreamName is the usage stream of a bus prefix.
func StreamName(prefix string) string { return strings.ToUpper(prefix) + "_USAGE" }

const seqFile = "usage-nats-seq"

// Shared is the ledger of every process: a usage.Recorder that publishes,
// and Run, which reads the others' records. It is safe for concurrent use.
type Shared struct {
	local     *usage.Ledger
	conn      natsbus.JetStreamer
	subject   string
	stream    string
	worker    string
	retention time.Duration
	log       *zap.Logger

	setupMu sync.Mutex
	js      jetstream.JetStream

	mu    sync.Mutex
	read  uint64 // the last stream sequence read
	saved uint64
}

var _ usage.Recorder = (*Shared)(nil)

// New returns the shared ledger over local, publishing as worker (a name
// unique among the processes, e.g. host and pid). retention bounds the
// stream (usage.retention; 0 keeps everything). It does no I/O.
func New(cfg config.NATSConfig, conn natsbus.JetStreamer, local *usage.Ledger, worker string, retention time.Duration, log *zap.Logger) *Shared {
	if log == nil {
		log = zap.NewNop()
	}
	return &Shared{local: local, conn: conn, subject: cfg.Prefix + ".usage", stream: StreamName(cfg.Prefix),
		worker: worker, retention: retention, log: log}
}

// Record prices r, publishes it and counts it locally. When the stream
// cannot be reached it is still counted here (and logged): the call was
// made, and this process's budget must see it.
func (s *Shared) Record(ctx context.Context, r usage.Record) error {
	r = s.local.Prepare(r)
	r.Worker = s.worker
	if err := s.publish(ctx, &r); err != nil {
		s.log.Warn("usage record not shared on the NATS bus; only this process counts it", zap.Error(err))
	}
	return s.local.Apply(ctx, r)
}

func (s *Shared) publish(ctx context.Context, r *usage.Record) error {
	js, err := s.setup(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("usage: encode record: %w", err)
	}
	// Bounded, so a model call never waits long on a slow bus.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ack, err := js.Publish(pctx, s.subject, data)
	if err != nil {
		return fmt.Errorf("usage: publish to %s: %w", s.stream, err)
	}
	r.Seq = ack.Sequence
	return nil
}

// setup opens the stream, creating it on first use.
func (s *Shared) setup(ctx context.Context) (jetstream.JetStream, error) {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	if s.js != nil {
		return s.js, nil
	}
	js, err := s.conn.JetStream(ctx)
	if err != nil {
		return nil, err
	}
	_, err = js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: s.stream, Description: "nanobot usage ledger: one message per model call attempt, of every process",
			Subjects: []string{s.subject}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			MaxAge: s.retention, DenyDelete: true,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.stream, err)
	}
	s.js = js
	return js, nil
}

// Run reads every process's records into the local ledger until ctx ends,
// from where this process last stopped.
func (s *Shared) Run(ctx context.Context) error {
	s.read = s.loadSeq()
	s.saved = s.read
	defer s.saveSeq()
	for {
		err := s.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("usage stream reader stopped; starting again", zap.Error(err))
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (s *Shared) consume(ctx context.Context) error {
	js, err := s.setup(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	from := s.read + 1
	s.mu.Unlock()
	cons, err := js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
	})
	if err != nil {
		return fmt.Errorf("usage: consumer on %s: %w", s.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("usage: read %s: %w", s.stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	save := time.NewTicker(time.Second)
	defer save.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("usage: message metadata: %w", err)
		}
		s.apply(ctx, msg.Data(), md.Sequence.Stream)
		select {
		case <-save.C:
			s.saveSeq()
		default:
		}
	}
}

// apply counts one record of the stream, unless it is this process's own
// (counted when it was made) or was read before a crash.
func (s *Shared) apply(ctx context.Context, data []byte, seq uint64) {
	defer func() {
		s.mu.Lock()
		s.read = max(s.read, seq)
		s.mu.Unlock()
	}()
	var r usage.Record
	if err := json.Unmarshal(data, &r); err != nil {
		s.log.Warn("usage stream: dropping a record that does not decode", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	if r.Worker == s.worker || s.local.HasSeq(seq) {
		return
	}
	r.Seq = seq
	if err := s.local.Apply(ctx, r); err != nil {
		s.log.Warn("usage stream: cannot count a record", zap.Uint64("seq", seq), zap.Error(err))
	}
}

func (s *Shared) loadSeq() uint64 {
	b, err := os.ReadFile(filepath.Join(s.local.Dir(), seqFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (s *Shared) saveSeq() {
	s.mu.Lock()
	read, saved := s.read, s.saved
	s.mu.Unlock()
	if read == saved {
		return
	}
	if err := atomicfile.Write(filepath.Join(s.local.Dir(), seqFile), []byte(strconv.FormatUint(read, 10)+"\n"), 0o600); err != nil {
		s.log.Warn("cannot save how far the usage stream was read; a restart reads it again", zap.Error(err))
		return
	}
	s.mu.Lock()
	s.saved = read
	s.mu.Unlock()
}
