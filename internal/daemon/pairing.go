package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/pairingkv"
	"github.com/nanobot-go/nanobot/internal/config"
)

// pairingTimeout bounds one pairing command's wait for NATS.
const pairingTimeout = 10 * time.Second

// Pairing is the pairing store as `nanobot pairing` uses it: list, approve,
// deny, revoke.
type Pairing = channels.Pairing

// ErrUnknownCode is returned by Approve and Deny for a code that is not
// pending (never given, or expired).
var ErrUnknownCode = channels.ErrUnknownCode

// OpenPairing opens the pairing store the gateway reads: the KV bucket with
// bus.backend: nats, the data dir's file otherwise, also when cfg is nil
// (there is no config file at all, as before configs named a bus). The
// running gateway sees a change at once: it reads the same file, or watches
// the same bucket. The returned function closes the store.
func OpenPairing(ctx context.Context, cfg *config.Config, dataDir string, log *zap.Logger) (Pairing, func(), error) {
	path := filepath.Join(dataDir, PairingFile)
	if cfg == nil || cfg.Bus.Backend != config.BusNATS {
		return channels.NewPairingStore(path), func() {}, nil
	}
	nc, err := natsbus.Dial(cfg.Bus.NATS, "nanobot pairing")
	if err != nil {
		return nil, nil, fmt.Errorf("pairing is kept in NATS (bus.backend: nats): cannot reach %s: %w", cfg.Bus.NATS.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	// The file is imported if this host has it and the bucket was never
	// given one: the command may be the first to use the bucket.
	s := pairingkv.New(cfg.Bus.NATS, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil }),
		pairingkv.Options{ImportFile: path, Timeout: pairingTimeout}, log.Named("pairing"))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			log.Warn("pairing store", zap.Error(err))
		}
		nc.Close()
	}, nil
}
