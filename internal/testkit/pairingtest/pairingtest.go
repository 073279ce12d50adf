// Package pairingtest is the behaviour every channels.Pairing must have,
// written once and run against each store (the JSON file of
// internal/channels and the KV bucket of internal/channels/pairingkv), so
// the two cannot drift apart. It is for tests only.
package pairingtest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/clock"
)

// Config is what a test needs to control in the stores it opens.
type Config struct {
	// Clock is the time of every store opened; codes expire by it.
	Clock clock.Clock
	// MaxPending caps the pending codes (0: the store's default).
	MaxPending int
}

// Open returns n stores sharing one state — as n processes would see it —
// configured by cfg. They are closed at the test's cleanup.
type Open func(t *testing.T, cfg Config, n int) []channels.Pairing

// Run runs every behaviour against the stores open returns.
func Run(t *testing.T, open Open) {
	t.Run("lifecycle", func(t *testing.T) { lifecycle(t, open) })
	t.Run("expire and bound", func(t *testing.T) { expireAndBound(t, open) })
	t.Run("deny", func(t *testing.T) { deny(t, open) })
	t.Run("concurrent writers lose nothing", func(t *testing.T) { concurrentWriters(t, open) })
}

// Eventually polls cond until it holds, failing the test after a generous
// timeout: another process's change reaches a store asynchronously.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func approved(s channels.Pairing, channel, sender string) func() bool {
	return func() bool { ok, err := s.IsApproved(channel, sender); return err == nil && ok }
}

func lifecycle(t *testing.T, open Open) {
	stores := open(t, Config{Clock: clock.System{}}, 2)
	daemon, cli := stores[0], stores[1] // two processes' views of one state
	code, err := daemon.Request("telegram", "42", "@bob", "42")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := daemon.Request("telegram", "42", "@bob", "42"); again != code {
		t.Fatalf("second request gave a new code %s, want the pending %s", again, code)
	}
	if ok, _ := daemon.IsApproved("telegram", "42"); ok {
		t.Fatal("approved before approval")
	}
	var st channels.PairingState
	Eventually(t, "the other process lists the code", func() bool {
		st, err = cli.List()
		return err == nil && len(st.Pending) == 1
	})
	if st.Pending[0].Code != code || st.Pending[0].SenderName != "@bob" || st.Pending[0].Channel != "telegram" {
		t.Fatalf("List = %+v", st)
	}
	if _, err := cli.Approve("NOPE2345"); !errors.Is(err, channels.ErrUnknownCode) {
		t.Fatalf("approve unknown code: %v", err)
	}
	a, err := cli.Approve(strings.ToLower(code))
	if err != nil || a.SenderID != "42" || a.Channel != "telegram" || a.SenderName != "@bob" {
		t.Fatalf("Approve = %+v, %v", a, err)
	}
	if ok, _ := cli.IsApproved("telegram", "42"); !ok {
		t.Fatal("the approving store does not see its own approval")
	}
	Eventually(t, "the daemon sees the CLI's approval", approved(daemon, "telegram", "42"))
	if ok, _ := daemon.IsApproved("discord", "42"); ok {
		t.Fatal("approval leaked to another channel")
	}
	for _, s := range stores {
		if _, err := s.Approve(code); !errors.Is(err, channels.ErrUnknownCode) {
			t.Fatalf("a code was usable twice: %v", err)
		}
	}
	st, _ = daemon.List()
	if len(st.Pending) != 0 || len(st.Approved) != 1 || st.Approved[0].SenderID != "42" {
		t.Fatalf("List after approval = %+v", st)
	}
	if found, err := cli.Revoke("telegram", "42"); !found || err != nil {
		t.Fatalf("Revoke = %v, %v", found, err)
	}
	if found, err := cli.Revoke("telegram", "42"); found || err != nil {
		t.Fatalf("second Revoke = %v, %v; want false", found, err)
	}
	Eventually(t, "the daemon sees the revocation", func() bool { return !approved(daemon, "telegram", "42")() })
}

func expireAndBound(t *testing.T, open Open) {
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := clock.Func(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	s := open(t, Config{Clock: at, MaxPending: 3}, 1)[0]
	old, _ := s.Request("t", "1", "", "")
	for i, id := range []string{"2", "3", "4"} {
		mu.Lock()
		now = now.Add(time.Duration(i+1) * time.Second) // codes ordered by age
		mu.Unlock()
		if _, err := s.Request("t", id, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Approve(old); !errors.Is(err, channels.ErrUnknownCode) {
		t.Fatal("oldest code survived the cap")
	}
	st, _ := s.List()
	if len(st.Pending) != 3 {
		t.Fatalf("pending = %d, want 3", len(st.Pending))
	}
	for i, p := range st.Pending {
		if want := fmt.Sprint(i + 2); p.SenderID != want {
			t.Fatalf("pending[%d] = %s, want %s (oldest first)", i, p.SenderID, want)
		}
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	st, _ = s.List()
	if len(st.Pending) != 0 {
		t.Fatalf("expired codes still listed: %+v", st.Pending)
	}
	// An expired code is replaced by a new one on the next request.
	code, err := s.Request("t", "2", "", "")
	if err != nil || code == "" {
		t.Fatalf("Request after expiry = %q, %v", code, err)
	}
	if _, err := s.Approve(code); err != nil {
		t.Fatalf("the fresh code is refused: %v", err)
	}
}

func deny(t *testing.T, open Open) {
	s := open(t, Config{Clock: clock.System{}}, 1)[0]
	code, err := s.Request("telegram", "42", "@bob", "42")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Deny(strings.ToLower(code))
	if err != nil || p.SenderID != "42" || p.Code != code {
		t.Fatalf("Deny = %+v, %v", p, err)
	}
	if _, err := s.Approve(code); !errors.Is(err, channels.ErrUnknownCode) {
		t.Fatalf("approve after deny: %v", err)
	}
	if _, err := s.Deny(code); !errors.Is(err, channels.ErrUnknownCode) {
		t.Fatalf("deny twice: %v", err)
	}
	if ok, _ := s.IsApproved("telegram", "42"); ok {
		t.Fatal("denied sender is approved")
	}
	again, err := s.Request("telegram", "42", "@bob", "42")
	if err != nil || again == code {
		t.Fatalf("request after deny = %q, %v; want a new code", again, err)
	}
}

// concurrentWriters runs several stores (processes) at once: each requests
// codes for its own senders, then all approve different senders' codes at
// the same time, and two of them race on one code. Nothing is lost and a
// code is used once.
func concurrentWriters(t *testing.T, open Open) {
	const n = 4
	stores := open(t, Config{Clock: clock.System{}}, n)
	codes := make([]string, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			c, err := s.Request("t", fmt.Sprint(i), "", "")
			if err != nil {
				t.Error(err)
			}
			codes[i] = c
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range stores {
		Eventually(t, "every store lists every code", func() bool {
			st, err := stores[i].List()
			return err == nil && len(st.Pending) == n
		})
	}
	// Store i approves sender i's code; stores 0 and 1 also race on code 0.
	var won sync.Map
	for i, s := range stores {
		wg.Go(func() {
			if _, err := s.Approve(codes[i]); err != nil && !errors.Is(err, channels.ErrUnknownCode) {
				t.Error(err)
			} else if err == nil {
				won.Store(fmt.Sprint(i, "/", i), true)
			}
		})
	}
	wg.Go(func() {
		if _, err := stores[1].Approve(codes[0]); err == nil {
			won.Store("1/0", true)
		} else if !errors.Is(err, channels.ErrUnknownCode) {
			t.Error(err)
		}
	})
	wg.Wait()
	_, a := won.Load("0/0")
	_, b := won.Load("1/0")
	if a == b {
		t.Fatalf("code 0 approved by both racers or neither: %v %v", a, b)
	}
	for i := range stores {
		for j := range n {
			Eventually(t, fmt.Sprintf("store %d sees sender %d approved", i, j), approved(stores[i], "t", fmt.Sprint(j)))
		}
		st, _ := stores[i].List()
		if len(st.Pending) != 0 || len(st.Approved) != n {
			t.Fatalf("store %d: %d pending, %d approved; want 0, %d", i, len(st.Pending), len(st.Approved), n)
		}
	}
}
