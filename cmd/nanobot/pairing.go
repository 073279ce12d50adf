package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

// newPairingCmd manages the pairing store (S-H1): with policy pairing, an
// unknown sender gets a one-time code and the owner lets them in here. The
// running daemon sees the change at once (it reads the same file).
func newPairingCmd(g *globalFlags) *cobra.Command {
	store := func() *channels.PairingStore {
		return channels.NewPairingStore(filepath.Join(dataDir(g), daemon.PairingFile))
	}
	cmd := &cobra.Command{Use: "pairing", Short: "Approve or revoke senders who asked to pair (policy: pairing)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List pending codes and approved senders",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store().List()
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
			a, err := store().Approve(args[0])
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
		Use:   "revoke CHANNEL SENDER_ID",
		Short: "Take back an approval",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ok, err := store().Revoke(args[0], args[1])
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
