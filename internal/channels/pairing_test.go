package channels_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/testkit/pairingtest"
)

// TestPairingStore runs the pairing behaviour against the file store, each
// "process" a separate instance on one file.
func TestPairingStore(t *testing.T) {
	pairingtest.Run(t, func(t *testing.T, cfg pairingtest.Config, n int) []channels.Pairing {
		path := filepath.Join(t.TempDir(), "sub", "pairing.json")
		stores := make([]channels.Pairing, n)
		for i := range stores {
			s := channels.NewPairingStore(path)
			s.Clock = cfg.Clock
			if cfg.MaxPending > 0 {
				s.MaxPending = cfg.MaxPending
			}
			stores[i] = s
		}
		return stores
	})
}

func TestPairingFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pairing.json")
	if _, err := channels.NewPairingStore(path).Request("telegram", "42", "", ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pairing file mode = %v, %v; want 0600", fi, err)
	}
}

// TestPairingCodes: the code helpers both stores share.
func TestPairingCodes(t *testing.T) {
	for _, tc := range []struct{ typed, want string }{
		{"ABCD2345", "ABCD2345"},
		{"abcd2345", "ABCD2345"},
		{"  aBcD2345\n", "ABCD2345"},
		{"", ""},
	} {
		if got := channels.NormalizePairingCode(tc.typed); got != tc.want {
			t.Errorf("NormalizePairingCode(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
	for range 100 {
		code, err := channels.NewPairingCode()
		if err != nil {
			t.Fatal(err)
		}
		if len(code) != 8 || strings.ContainsAny(code, "01ILO") || channels.NormalizePairingCode(code) != code {
			t.Fatalf("NewPairingCode() = %q: want 8 characters of the alphabet without look-alikes", code)
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	p := channels.PairingRequest{Code: "X", Channel: "telegram", SenderID: "42", SenderName: "ann", ChatID: "7"}
	want := channels.Approval{Channel: "telegram", SenderID: "42", SenderName: "ann", ApprovedAt: at.UTC()}
	if got := p.Approval(at); got != want {
		t.Errorf("Approval = %+v, want %+v", got, want)
	}
}
