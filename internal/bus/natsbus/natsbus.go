package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Timings that are not worth a configuration key.
const (
	// fetchWait is how long one pull request waits for a partition's next
	// message; shorter costs idle requests, longer delays shutdown nothing
	// (the request is cancelled with the context).
	fetchWait = 5 * time.Second
	// duplicates is the inbound stream's deduplication window: a channels
	// process that publishes a platform message again after a restart within
	// it is ignored.
	duplicates = 2 * time.Minute
	// publishFor bounds the retries of one publish while NATS is unreachable
	// (a restart, a failover); past it the caller gets the error.
	publishFor = 2 * time.Minute
	// stopWait is how long a /stop waits for the worker running its session.
	stopWait = 2 * time.Second
	// retryWait is the pause between two attempts to reach NATS.
	retryWait = 250 * time.Millisecond
)

// ErrNotReady is returned by Healthy until Run connected and set the
// streams up, and while the connection is down.
var ErrNotReady = errors.New("nats: not connected")

// Roles say which side of the bus this process serves.
type Roles struct {
	// Agent: take inbound messages from the partitions into the local
	// inbound queue (a worker).
	Agent bool
	// Channels: take outbound messages into the local outbound queue (the
	// channels process). At most one process should.
	Channels bool
}

// Options configure a Bus beyond bus.nats.
type Options struct {
	Roles Roles
	// Capacity is how many inbound messages a worker holds at once
	// (agents.max_concurrent_turns, taken as given); at its cap it stops
	// taking more, so idle workers get them.
	Capacity int
	// Name names the connection in the server's monitoring ("nanobot agent").
	Name string
	// OnTake, when set, is called with a message's session key before the
	// message is handed to the local agent. The daemon drops its cached
	// copy of the session there: the last turn may have run on another
	// worker.
	OnTake func(key string)
}

// Bus publishes a process's messages to JetStream and feeds its local
// queues from it. Publish* may be called before Run got connected: they wait
// for it (within their context).
type Bus struct {
	cfg   config.NATSConfig
	opts  Options
	local *bus.Bus
	log   *zap.Logger
	n     names

	ready chan struct{} // closed once connected and set up
	nc    *nats.Conn
	js    jetstream.JetStream

	held *held
	// slots bounds the inbound messages held; a slot is taken when one
	// arrives and freed when it is acknowledged or handed back.
	slots *slots
	// answered are the inbound messages this worker acknowledged lately.
	answered *answeredSet
}

// New returns a bus over NATS that feeds local. cfg is taken as config gives
// it (bus.nats.partitions and the rest are config's to default and
// validate). It does no I/O; Run does.
func New(cfg config.NATSConfig, opts Options, local *bus.Bus, log *zap.Logger) *Bus {
	return &Bus{
		cfg: cfg, opts: opts, local: local, log: log, n: names{prefix: cfg.Prefix},
		ready:    make(chan struct{}),
		held:     newHeld(),
		slots:    newSlots(opts.Capacity),
		answered: newAnsweredSet(4096),
	}
}

// Run connects, makes sure the streams and consumers exist, and serves the
// process's roles until ctx ends. The local queues are closed by their owner
// (the daemon): a message taken from NATS after its queue closed is handed
// back at once. On return every message still held is handed back, so
// another worker takes it without waiting for ack_wait.
func (b *Bus) Run(ctx context.Context) error {
	nc, err := connect(b.cfg, b.opts.Name, b.log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	if err := b.setupRetrying(ctx, js); err != nil {
		return err
	}
	// The consumers are looked up before anything runs, and again should
	// NATS restart meanwhile: a lookup that failed once used to end Run
	// (and left the goroutines already started running on a closed
	// connection).
	ins, out, err := b.consumersRetrying(ctx, js)
	if err != nil {
		return err
	}
	b.nc, b.js = nc, js
	var sub *nats.Subscription
	if b.opts.Roles.Agent {
		if sub, err = nc.Subscribe(b.n.stopSubject(), b.onStop); err != nil {
			return fmt.Errorf("nats: subscribe %s: %w", b.n.stopSubject(), err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	close(b.ready)
	b.log.Info("nats bus ready", zap.String("url", nc.ConnectedUrlRedacted()), zap.Bool("agent", b.opts.Roles.Agent),
		zap.Bool("channels", b.opts.Roles.Channels), zap.Int("partitions", b.cfg.Partitions))

	var wg sync.WaitGroup
	wg.Go(func() { b.heartbeat(ctx) })
	for _, cons := range ins {
		wg.Go(func() { b.takeInbound(ctx, cons) })
	}
	if out != nil {
		wg.Go(func() { b.takeOutbound(ctx, out) })
	}
	<-ctx.Done()
	wg.Wait()
	b.handBack()
	// Acks and naks must reach the server before the connection closes.
	if err := nc.Flush(); err != nil {
		b.log.Warn("nats: flush at shutdown", zap.Error(err))
	}
	return nil
}

// Healthy reports whether the bus is connected and set up, for /readyz.
func (b *Bus) Healthy() error {
	select {
	case <-b.ready:
	default:
		return ErrNotReady
	}
	if !b.nc.IsConnected() {
		return fmt.Errorf("%w (%s)", ErrNotReady, b.nc.Status())
	}
	return nil
}

// JetStreamer gives the JetStream context of a connection to the stores
// kept in NATS (jsstore, pairingkv, cursorkv). The daemon passes the Bus,
// which waits until it is connected; the CLI and tests a JetStreamFunc.
type JetStreamer interface {
	JetStream(ctx context.Context) (jetstream.JetStream, error)
}

// JetStreamFunc adapts a function to JetStreamer.
type JetStreamFunc func(ctx context.Context) (jetstream.JetStream, error)

// JetStream calls f.
func (f JetStreamFunc) JetStream(ctx context.Context) (jetstream.JetStream, error) { return f(ctx) }

// JetStream returns the bus's JetStream context once Run is connected and
// set up, so the session store of bus.nats.sessions: jetstream shares the
// connection (and its reconnects) instead of opening one of its own.
func (b *Bus) JetStream(ctx context.Context) (jetstream.JetStream, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.js, nil
}

// Held reports how many messages the process holds unacknowledged, for
// metrics.
func (b *Bus) Held() int { return b.held.len() }

// wait blocks until Run is connected and set up.
func (b *Bus) wait(ctx context.Context) error {
	select {
	case <-b.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PublishInbound stores m in its session's partition. m.Ack is called once
// the stream confirmed it: from then on the stream, not the platform, keeps
// the message. A /stop first goes straight to the worker running the
// session, if one does.
func (b *Bus) PublishInbound(ctx context.Context, m bus.InboundMessage) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	data, err := encodeIn(m)
	if err != nil {
		return fmt.Errorf("nats: encode inbound: %w", err)
	}
	if isStop(m.Content) && m.Metadata["source"] == "" && b.stopRunning(ctx, data) {
		ack(m)
		return nil
	}
	var opts []jetstream.PublishOpt
	if m.MessageID != "" {
		opts = append(opts, jetstream.WithMsgID(m.Channel+":"+m.ChatID+":"+m.MessageID))
	} else {
		opts = append(opts, jetstream.WithMsgID(nats.NewInbox()))
	}
	subject := b.n.inSubject(partition(m.Key(), b.cfg.Partitions))
	if err := b.publish(ctx, subject, data, opts...); err != nil {
		return fmt.Errorf("nats: publish inbound %s: %w", m.Key(), err)
	}
	ack(m)
	return nil
}

func ack(m bus.InboundMessage) {
	if m.Ack != nil {
		m.Ack()
	}
}

// PublishOutbound stores m in the outbound stream, then calls m.Delivered:
// the stream now keeps it until the channels process delivered it.
func (b *Bus) PublishOutbound(ctx context.Context, m bus.OutboundMessage) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	data, err := encodeOut(m)
	if err != nil {
		return fmt.Errorf("nats: encode outbound: %w", err)
	}
	// One id per message, kept across retries: a publish whose answer was
	// lost is not stored twice.
	if err := b.publish(ctx, b.n.outSubject(m.Channel), data, jetstream.WithMsgID(nats.NewInbox())); err != nil {
		return fmt.Errorf("nats: publish outbound %s:%s: %w", m.Channel, m.ChatID, err)
	}
	if m.Delivered != nil {
		m.Delivered()
	}
	return nil
}

// publish stores data, retrying while NATS is unreachable (within
// publishFor and ctx). The message id makes a retry of a publish that was
// in fact stored harmless.
func (b *Bus) publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) error {
	ctx, cancel := context.WithTimeout(ctx, publishFor)
	defer cancel()
	for {
		attempt, stop := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.js.Publish(attempt, subject, data, opts...)
		stop()
		if err == nil || !retryable(err) || b.nc.IsClosed() { // closed: Run has ended, for good
			return err
		}
		b.log.Debug("nats: publish failed; retrying", zap.String("subject", subject), zap.Error(err))
		if sleep(ctx, retryWait) != nil {
			return err
		}
	}
}

// retryable reports whether a publish may succeed later: the connection or
// the stream's leader is back. A refused message (too large, bad subject)
// is not.
func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
