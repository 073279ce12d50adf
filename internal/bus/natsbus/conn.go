package natsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
)

// connect opens the connection. It keeps reconnecting for ever: a NATS
// restart or failover must not end the daemon, and publishes wait for it.
func connect(cfg config.NATSConfig, name string, log *zap.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(retryWait),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			log.Warn("nats: disconnected; reconnecting", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats: asynchronous error", zap.Error(err))
		}),
	}
	nc, err := nats.Connect(cfg.URL, append(opts, authOptions(cfg)...)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	return nc, nil
}

// setupRetrying runs Setup until it succeeds or ctx ends: the daemon may
// start before NATS does (docker compose, systemd).
func (b *Bus) setupRetrying(ctx context.Context, js jetstream.JetStream) error {
	err := Retry(ctx, time.Second, func(err error) {
		b.log.Warn("nats: cannot set up the streams yet; retrying", zap.Error(err))
	}, func() error { return Setup(ctx, js, b.cfg) })
	if err != nil {
		return fmt.Errorf("nats: set up streams: %w", err)
	}
	return nil
}

// consumersRetrying looks up the consumers of the process's roles (Setup
// made them): every partition's inbound one for an agent, the outbound one
// for channels (nil otherwise). A lookup that fails, as while NATS restarts,
// is tried again until it succeeds or ctx ends.
func (b *Bus) consumersRetrying(ctx context.Context, js jetstream.JetStream) (ins []jetstream.Consumer, out jetstream.Consumer, err error) {
	err = Retry(ctx, retryWait, func(err error) {
		b.log.Warn("nats: cannot look up the consumers yet; retrying", zap.Error(err))
	}, func() (err error) {
		ins, out, err = b.consumers(ctx, js)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("nats: look up consumers: %w", err)
	}
	return ins, out, nil
}

// consumers looks them up once, within 5 s: a request sent as NATS went
// away is never answered, and a caller without a deadline would wait for
// ever.
func (b *Bus) consumers(ctx context.Context, js jetstream.JetStream) (ins []jetstream.Consumer, out jetstream.Consumer, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if b.opts.Roles.Agent {
		for p := range b.cfg.Partitions {
			cons, err := js.Consumer(ctx, b.n.inStream(), b.n.inConsumer(p))
			if err != nil {
				return nil, nil, fmt.Errorf("consumer %s: %w", b.n.inConsumer(p), err)
			}
			ins = append(ins, cons)
		}
	}
	if b.opts.Roles.Channels {
		if out, err = js.Consumer(ctx, b.n.outStream(), b.n.outConsumer()); err != nil {
			return nil, nil, fmt.Errorf("consumer %s: %w", b.n.outConsumer(), err)
		}
	}
	return ins, out, nil
}

// ensureStream creates the stream of cfg when it is missing and updates it
// only when a setting we choose differs. Every process runs this at start,
// and updating a stream unchanged while another process creates a consumer
// on it races inside the server (seen under the race detector), so an
// unchanged stream is left alone.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	st, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err = js.CreateStream(ctx, cfg); !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return err // created (or failed); another process may have made it the same way
		}
		st, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return err
	}
	if have := st.CachedInfo().Config; have.Description == cfg.Description && slices.Equal(have.Subjects, cfg.Subjects) &&
		have.Retention == cfg.Retention && have.Storage == cfg.Storage && have.Duplicates == cfg.Duplicates {
		return nil
	}
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// Setup creates or updates the streams and consumers of cfg. It is
// idempotent and every process runs it, so no process has to start first.
func Setup(ctx context.Context, js jetstream.JetStream, cfg config.NATSConfig) error {
	n := names{prefix: cfg.Prefix}
	for _, sc := range []jetstream.StreamConfig{
		{Name: n.inStream(), Subjects: []string{n.inSubjects()},
			Description: "nanobot inbound messages, one subject per partition of session keys"},
		{Name: n.outStream(), Subjects: []string{n.outSubjects()},
			Description: "nanobot outbound messages, one subject per channel"},
	} {
		// Both are work queues on disk: a message is kept until it is
		// handled, and a publish retried within duplicates is stored once.
		sc.Retention, sc.Storage, sc.Duplicates = jetstream.WorkQueuePolicy, jetstream.FileStorage, duplicates
		if err := ensureStream(ctx, js, sc); err != nil {
			return fmt.Errorf("stream %s: %w", sc.Name, err)
		}
	}
	for p := range cfg.Partitions {
		if _, err := js.CreateOrUpdateConsumer(ctx, n.inStream(), jetstream.ConsumerConfig{
			Durable:       n.inConsumer(p),
			FilterSubject: n.inSubject(p),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			// One message of a partition in flight: its chats are served
			// one message at a time, in order, by whichever worker holds it.
			MaxAckPending: 1,
			MaxDeliver:    -1,
		}); err != nil {
			return fmt.Errorf("consumer %s: %w", n.inConsumer(p), err)
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, n.outStream(), jetstream.ConsumerConfig{
		Durable:       n.outConsumer(),
		FilterSubject: n.outSubjects(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: 10000,
		MaxDeliver:    -1,
	}); err != nil {
		return fmt.Errorf("consumer %s: %w", n.outConsumer(), err)
	}
	return nil
}

// Check reports whether the streams and consumers of cfg exist on the
// server nc is connected to, for nanobot doctor.
func Check(ctx context.Context, nc *nats.Conn, cfg config.NATSConfig, more ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	n := names{prefix: cfg.Prefix}
	for _, s := range append([]string{n.inStream(), n.outStream()}, more...) {
		if _, err := js.Stream(ctx, s); err != nil {
			return fmt.Errorf("stream %s: %w", s, err)
		}
	}
	return nil
}

// Dial connects once without retrying, for nanobot doctor.
func Dial(cfg config.NATSConfig, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.Timeout(5 * time.Second)}
	return nats.Connect(cfg.URL, append(opts, authOptions(cfg)...)...)
}

// authOptions are the credentials and TLS files of cfg.
func authOptions(cfg config.NATSConfig) []nats.Option {
	var opts []nats.Option
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	if cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	return opts
}
