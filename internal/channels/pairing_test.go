package channels_test

import (
	"os"
	"path/filepath"
	"testing"

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
			s.Now = cfg.Now
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
