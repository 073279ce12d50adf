package pairingkv_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/pairingkv"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/testkit/pairingtest"
)

// start runs a store as one process would: its own connection to url, Run
// until the test's cleanup.
func start(t *testing.T, url string, opts pairingkv.Options) *pairingkv.Store {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := pairingkv.New(config.NATSConfig{Prefix: "test"}, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) {
		return js, nil
	}), opts, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		nc.Close()
	})
	return s
}

// TestSameAsFileStore runs the file store's behaviour against the KV store,
// each "process" a store with its own connection to one NATS.
func TestSameAsFileStore(t *testing.T) {
	pairingtest.Run(t, func(t *testing.T, cfg pairingtest.Config, n int) []channels.Pairing {
		srv := natsfake.Start(t, t.TempDir())
		stores := make([]channels.Pairing, n)
		for i := range stores {
			stores[i] = start(t, srv.URL(), pairingkv.Options{Clock: cfg.Clock, MaxPending: cfg.MaxPending})
		}
		return stores
	})
}

// TestConcurrentChangesOfOneSender has two processes change one sender at
// once, many rounds: a request racing a revocation, two approvals of one
// code. Each change is applied to the value the other left, never over it.
func TestConcurrentChangesOfOneSender(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	a, b := start(t, srv.URL(), pairingkv.Options{}), start(t, srv.URL(), pairingkv.Options{})
	for round := range 20 {
		sender := fmt.Sprint("s", round)
		code, err := a.Request("telegram", sender, "", "")
		if err != nil {
			t.Fatal(err)
		}
		pairingtest.Eventually(t, "b sees the code", func() bool {
			st, _ := b.List()
			for _, p := range st.Pending {
				if p.Code == code {
					return true
				}
			}
			return false
		})
		var wins sync.WaitGroup
		results := make([]error, 2)
		for i, s := range []*pairingkv.Store{a, b} {
			wins.Go(func() { _, results[i] = s.Approve(code) })
		}
		wins.Wait()
		ok := 0
		for _, err := range results {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, channels.ErrUnknownCode):
				t.Fatal(err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d approvals of one code succeeded, want 1 (%v)", round, ok, results)
		}
		// A revocation racing a new request of the same sender: both
		// land, whatever the order — the approval gone, the code pending.
		var both sync.WaitGroup
		var newCode string
		both.Go(func() {
			if found, err := a.Revoke("telegram", sender); err != nil || !found {
				t.Errorf("Revoke = %v, %v", found, err)
			}
		})
		both.Go(func() {
			var err error
			if newCode, err = b.Request("telegram", sender, "", ""); err != nil {
				t.Error(err)
			}
		})
		both.Wait()
		for _, s := range []*pairingkv.Store{a, b} {
			pairingtest.Eventually(t, "both changes seen", func() bool {
				ok, _ := s.IsApproved("telegram", sender)
				st, _ := s.List()
				for _, p := range st.Pending {
					if p.Code == newCode && p.SenderID == sender {
						return !ok
					}
				}
				return false
			})
		}
		if _, err := a.Deny(newCode); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportsTheFileOnce imports the file store's entries into an empty
// bucket at the first start; a later start does not import again, so an
// approval revoked through KV stays revoked.
func TestImportsTheFileOnce(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	path := filepath.Join(t.TempDir(), "pairing.json")
	file := channels.NewPairingStore(path)
	old, _ := file.Request("telegram", "1", "@ann", "1")
	if _, err := file.Approve(old); err != nil {
		t.Fatal(err)
	}
	pending, _ := file.Request("discord", "2", "bob", "2")

	// A CLI on another host, without the file, does not mark the bucket.
	elsewhere := start(t, srv.URL(), pairingkv.Options{ImportFile: filepath.Join(t.TempDir(), "absent.json")})
	if st, err := elsewhere.List(); err != nil || len(st.Approved)+len(st.Pending) != 0 {
		t.Fatalf("List = %+v, %v; want empty", st, err)
	}

	s := start(t, srv.URL(), pairingkv.Options{ImportFile: path})
	if ok, err := s.IsApproved("telegram", "1"); !ok || err != nil {
		t.Fatalf("imported approval: %v, %v", ok, err)
	}
	st, _ := s.List()
	if len(st.Pending) != 1 || st.Pending[0].Code != pending || st.Approved[0].SenderName != "@ann" {
		t.Fatalf("List after import = %+v", st)
	}
	if _, err := s.Revoke("telegram", "1"); err != nil {
		t.Fatal(err)
	}
	again := start(t, srv.URL(), pairingkv.Options{ImportFile: path})
	if ok, _ := again.IsApproved("telegram", "1"); ok {
		t.Fatal("the file was imported a second time: a revoked approval came back")
	}
	if _, err := again.Approve(pending); err != nil {
		t.Fatalf("the imported code: %v", err)
	}
}

// TestWaitsForNATS: a store whose NATS is not reachable answers with an
// error after its timeout instead of hanging or letting anyone in.
func TestWaitsForNATS(t *testing.T) {
	s := pairingkv.New(config.NATSConfig{Prefix: "test"}, natsbus.JetStreamFunc(func(ctx context.Context) (jetstream.JetStream, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), pairingkv.Options{Timeout: 50 * time.Millisecond}, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	if ok, err := s.IsApproved("telegram", "1"); ok || err == nil {
		t.Fatalf("IsApproved without NATS = %v, %v; want an error", ok, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Request("telegram", "1", "", ""); !errors.Is(err, pairingkv.ErrClosed) {
		t.Fatalf("Request after Run = %v, want ErrClosed", err)
	}
}
