package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/pairingkv"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

// pairingTimeout bounds one pairing command's wait for NATS.
const pairingTimeout = 10 * time.Second

// newPairingCmd manages the pairing store
// (docs/channels.md#inbound-access-pairingstore-intake-lanes): with policy
// pairing, an unknown sender gets a one-time code and the owner lets them in
// here. The running daemon sees the change at once: it reads the same file,
// or, with bus.backend: nats, watches the same KV bucket (docs/scale-out.md),
// which this command reaches from any host.
func newPairingCmd(g *globalFlags) *cobra.Command {
	// withStore runs fn on the store the config names and closes it.
	withStore := func(cmd *cobra.Command, fn func(channels.Pairing) error) error {
		s, closeStore, err := openPairing(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer closeStore()
		return fn(s)
	}
	cmd := &cobra.Command{Use: "pairing", Short: "Approve, deny or revoke senders who asked to pair (policy: pairing)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List pending codes and approved senders",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st channels.PairingState
			err := withStore(cmd, func(s channels.Pairing) (err error) { st, err = s.List(); return err })
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PENDING\tCHANNEL\tSENDER\tNAME\tASKED")
			for _, p := range st.Pending {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Code, p.Channel, p.SenderID, p.SenderName, p.Created.Format("2006-01-02 15:04"))
			}
			fmt.Fprintln(w, "\nAPPROVED\tCHANNEL\tSENDER\tNAME\tSINCE")
			for _, a := range st.Approved {
				fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\n", a.Channel, a.SenderID, a.SenderName, a.ApprovedAt.Format("2006-01-02 15:04"))
			}
			return w.Flush()
		},
	}, &cobra.Command{
		Use:   "approve CODE",
		Short: "Let the sender who was given CODE talk to the bot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a channels.Approval
			err := withStore(cmd, func(s channels.Pairing) (err error) { a, err = s.Approve(args[0]); return err })
			if errors.Is(err, channels.ErrUnknownCode) {
				return fmt.Errorf("code %q is unknown or expired; `nanobot pairing list` shows pending codes", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "approved %s user %s %s\n", a.Channel, a.SenderID, a.SenderName)
			return nil
		},
	}, &cobra.Command{
		Use:   "deny CODE",
		Short: "Drop a pending code without letting its sender in (they may ask again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p channels.PairingRequest
			err := withStore(cmd, func(s channels.Pairing) (err error) { p, err = s.Deny(args[0]); return err })
			if errors.Is(err, channels.ErrUnknownCode) {
				return fmt.Errorf("code %q is unknown or expired; `nanobot pairing list` shows pending codes", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "denied %s user %s %s\n", p.Channel, p.SenderID, p.SenderName)
			return nil
		},
	}, &cobra.Command{
		Use:   "revoke CHANNEL SENDER_ID",
		Short: "Take back an approval",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ok bool
			err := withStore(cmd, func(s channels.Pairing) (err error) { ok, err = s.Revoke(args[0], args[1]); return err })
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s user %s was not approved", args[0], args[1])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s user %s\n", args[0], args[1])
			return nil
		},
	})
	return cmd
}

// openPairing opens the pairing store of the config: the KV bucket with
// bus.backend: nats, the data dir's file otherwise — also when there is no
// config file at all, as before configs named a bus. The returned function
// closes it.
func openPairing(ctx context.Context, g *globalFlags) (channels.Pairing, func(), error) {
	path := filepath.Join(dataDir(g), daemon.PairingFile)
	cfg, log, err := loadConfig(g)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return channels.NewPairingStore(path), func() {}, nil
	case err != nil:
		return nil, nil, err
	case cfg.Bus.Backend != config.BusNATS:
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
	s := pairingkv.New(cfg.Bus.NATS, pairingkv.ConnFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil }),
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
