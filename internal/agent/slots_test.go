package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestTurnSlotsDefaults(t *testing.T) {
	tests := []struct {
		total, group, per         int
		wantGroup, wantPer, wantT int
	}{
		{4, 0, 0, 3, 2, 4},
		{1, 0, 0, 1, 1, 1}, // nothing can be reserved with one slot
		{2, 0, 0, 1, 1, 2},
		{8, 0, 0, 7, 4, 8},
		{4, 4, 0, 4, 2, 4},
		{4, 9, 9, 4, 4, 4}, // clamped
		{0, 0, 0, 1, 1, 1},
	}
	for _, tt := range tests {
		s := newTurnSlots(tt.total, tt.group, tt.per)
		if s.total != tt.wantT || s.groupMax != tt.wantGroup || s.perGroup != tt.wantPer {
			t.Errorf("newTurnSlots(%d, %d, %d) = total %d, group %d, per group %d; want %d, %d, %d",
				tt.total, tt.group, tt.per, s.total, s.groupMax, s.perGroup, tt.wantT, tt.wantGroup, tt.wantPer)
		}
	}
}

// try acquires without waiting: it reports whether a slot was free.
func try(t *testing.T, s *turnSlots, group string) (func(), bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.mu.Lock()
	fits := s.fits(group)
	s.mu.Unlock()
	if !fits {
		return nil, false
	}
	release, err := s.acquire(ctx, group)
	if err != nil {
		// acquire checks fits before ctx, so a free slot is always taken.
		t.Fatalf("acquire with a free slot: %v", err)
	}
	return release, true
}

func TestTurnSlotsShareFairly(t *testing.T) {
	s := newTurnSlots(3, 2, 1)
	a1, ok := try(t, s, "g:a")
	if !ok {
		t.Fatal("first group turn refused")
	}
	if _, ok := try(t, s, "g:a"); ok {
		t.Fatal("a second turn of group a got a slot past max_turns_per_group 1")
	}
	b1, ok := try(t, s, "g:b")
	if !ok {
		t.Fatal("group b refused while group a holds one slot")
	}
	if _, ok := try(t, s, "g:c"); ok {
		t.Fatal("group c got a slot past max_group_turns 2")
	}
	dm, ok := try(t, s, "")
	if !ok {
		t.Fatal("a direct message was refused the slot reserved for it")
	}
	if _, ok := try(t, s, ""); ok {
		t.Fatal("a fourth turn ran past max_concurrent_turns 3")
	}
	dm()
	dm() // releasing twice is harmless
	if total, groups := s.inUse(); total != 2 || groups != 2 {
		t.Fatalf("in use = %d (%d groups), want 2 (2)", total, groups)
	}
	if _, ok := try(t, s, "g:c"); ok {
		t.Fatal("the freed direct-message slot went to a group")
	}
	a1()
	c1, ok := try(t, s, "g:c")
	if !ok {
		t.Fatal("group c still refused after group a finished")
	}
	b1()
	c1()
	if total, groups := s.inUse(); total != 0 || groups != 0 || len(s.byGroup) != 0 {
		t.Fatalf("after all released: %d in use, %d groups, %v", total, groups, s.byGroup)
	}
}

func TestTurnSlotsWaitAndCancel(t *testing.T) {
	s := newTurnSlots(1, 1, 1)
	release, err := s.acquire(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := s.acquire(context.Background(), "g:x")
		if err == nil {
			r()
		}
		got <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := s.acquire(ctx, "")
		cancelled <- err
	}()
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by release")
	}
}

// A busy group with many topics cannot keep a direct message waiting: with
// two slots, the group's topics share one and the DM gets the other.
func TestBusyGroupDoesNotStarveDirectMessages(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConcurrentTurns = 2 })
	gate := make(chan struct{})
	var gateOnce sync.Once
	open := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var groupInFlight, groupPeak atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if !strings.Contains(r.LastUserText(), "topic") {
			return fakellm.Reply{Text: "dm answered"}
		}
		n := groupInFlight.Add(1)
		for p := groupPeak.Load(); n > p && !groupPeak.CompareAndSwap(p, n); p = groupPeak.Load() {
		}
		<-gate
		groupInFlight.Add(-1)
		return fakellm.Reply{Text: "topic answered"}
	}
	for _, topic := range []string{"1", "2", "3", "4"} {
		m := bus.InboundMessage{Channel: "test", ChatID: "-42", SenderID: "u1", MessageID: "t" + topic,
			Content: "topic " + topic, SessionKey: "test:-42:topic:" + topic, Group: "test:-42"}
		if err := h.bus.PublishInbound(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for groupInFlight.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no group turn started")
		}
		time.Sleep(time.Millisecond)
	}
	h.send("dm", "hello")
	if f := h.waitFinals("dm", 1)[0]; f.Content != "dm answered" {
		t.Fatalf("dm final = %q", f.Content)
	}
	open() // the topics now finish one by one through the group's single slot
	h.waitFor("all topics answered", func(out []bus.OutboundMessage) bool {
		n := 0
		for _, m := range out {
			if m.Kind == bus.KindFinal && m.Content == "topic answered" {
				n++
			}
		}
		return n == 4
	})
	if p := groupPeak.Load(); p != 1 {
		t.Errorf("group turns in flight peaked at %d, want 1 (max_group_turns defaults to max_concurrent_turns-1)", p)
	}
}

// Waiters are served first come, first served: with one slot and ten
// waiters queued in order, the slot passes down the queue in that order.
func TestTurnSlotsServeWaitersInArrivalOrder(t *testing.T) {
	s := newTurnSlots(1, 0, 0)
	hold, _ := s.acquire(context.Background(), "")
	order := make(chan int, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.acquire(context.Background(), "")
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			release()
		}()
		// Wait until this waiter is queued before starting the next one.
		for {
			s.mu.Lock()
			n := len(s.queue)
			s.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Microsecond)
		}
	}
	hold()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d served when %d was first in line", got, want)
		}
		want++
	}
}

// A waiter that gives up is removed from the queue; one that gives up just
// as it was granted hands the slot on instead of leaking it.
func TestTurnSlotsCancelledWaiter(t *testing.T) {
	s := newTurnSlots(1, 0, 0)
	hold, _ := s.acquire(context.Background(), "")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.acquire(ctx, "")
		errc <- err
	}()
	for {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Microsecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	hold()
	if used, _ := s.inUse(); used != 0 {
		t.Fatalf("%d slots in use after everything was released or cancelled", used)
	}

	// Granted and cancelled at once: the slot must come back.
	for range 200 {
		hold, _ := s.acquire(context.Background(), "")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if release, err := s.acquire(ctx, ""); err == nil {
				release()
			}
		}()
		go cancel()
		hold()
		<-done
		if used, _ := s.inUse(); used != 0 {
			t.Fatalf("slot leaked in a grant/cancel race: %d in use", used)
		}
	}
}
