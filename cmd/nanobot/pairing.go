package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/daemon"
)

// newPairingCmd manages the pairing store
// (docs/channels.md#inbound-access-pairingstore-intake-lanes): with policy
// pairing, an unknown sender gets a one-time code and the owner lets them in
// here. The running daemon sees the change at once: it reads the same file,
// or, with bus.backend: nats, watches the same KV bucket (docs/scale-out.md),
// which this command reaches from any host.
func newPairingCmd(g *globalFlags) *cobra.Command {
	// withStore runs fn on the store the config names and closes it.
	withStore := func(cmd *cobra.Command, fn func(daemon.Pairing) error) error {
		s, closeStore, err := openPairing(cmd.Context(), g)
		if err != nil {
			return err
		}
		defer closeStore()
		return fn(s)
	}
	cmd := &cobra.Command{Use: "pairing", Short: "Approve, deny or revoke senders who asked to pair (policy: pairing)"}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "List pending codes and approved senders",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withStore(cmd, func(s daemon.Pairing) error {
					st, err := s.List()
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
				})
			},
		},
		settleCmd(withStore, "approve", "approved", "Let the sender who was given CODE talk to the bot",
			func(s daemon.Pairing, code string) (string, error) {
				a, err := s.Approve(code)
				return sender(a.Channel, a.SenderID, a.SenderName), err
			}),
		settleCmd(withStore, "deny", "denied", "Drop a pending code without letting its sender in (they may ask again)",
			func(s daemon.Pairing, code string) (string, error) {
				p, err := s.Deny(code)
				return sender(p.Channel, p.SenderID, p.SenderName), err
			}),
		&cobra.Command{
			Use:   "revoke CHANNEL SENDER_ID",
			Short: "Take back an approval",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				var ok bool
				err := withStore(cmd, func(s daemon.Pairing) (err error) { ok, err = s.Revoke(args[0], args[1]); return err })
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

// settleCmd is `pairing VERB CODE`, approve or deny: settle settles the
// pending code in the store and names the sender it was for, and the
// command prints that it was done.
func settleCmd(withStore func(*cobra.Command, func(daemon.Pairing) error) error, verb, done, short string,
	settle func(s daemon.Pairing, code string) (sender string, err error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " CODE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withStore(cmd, func(s daemon.Pairing) error {
				who, err := settle(s, args[0])
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", done, who)
				}
				return err
			})
			if errors.Is(err, daemon.ErrUnknownCode) {
				return fmt.Errorf("code %q is unknown or expired; `nanobot pairing list` shows pending codes", args[0])
			}
			return err
		},
	}
}

// sender names the sender of a pairing code as the commands print it.
func sender(channel, id, name string) string { return fmt.Sprintf("%s user %s %s", channel, id, name) }

// openPairing opens the pairing store the config names (daemon.OpenPairing);
// without a config file, the data dir's file. The returned function closes it.
func openPairing(ctx context.Context, g *globalFlags) (daemon.Pairing, func(), error) {
	cfg, log, err := loadConfig(g)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cfg, log = nil, zap.NewNop()
	case err != nil:
		return nil, nil, err
	}
	return daemon.OpenPairing(ctx, cfg, dataDir(g), log)
}
