package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeFiresDueTimersOnly(t *testing.T) {
	c := NewFake()
	a, b := c.NewTimer(time.Second), c.NewTimer(3*time.Second)
	stopped := c.NewTimer(2 * time.Second)
	if !stopped.Stop() || c.Pending() != 2 {
		t.Fatalf("Stop or Pending wrong: %d", c.Pending())
	}
	if d, ok := c.NextDeadline(); !ok || d != time.Second {
		t.Fatalf("NextDeadline = %s", d)
	}
	c.Advance(2 * time.Second)
	select {
	case <-a.C():
	default:
		t.Fatal("1s timer did not fire after 2s")
	}
	select {
	case <-b.C():
		t.Fatal("3s timer fired after 2s")
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if a.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	c.Advance(time.Second)
	<-b.C()
}

func TestSleepAndWaitForTimers(t *testing.T) {
	c := NewFake()
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), c, time.Minute) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !c.WaitForTimers(ctx, 1) {
		t.Fatal("Sleep never armed a timer")
	}
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := Sleep(cctx, c, time.Hour); err == nil {
		t.Fatal("Sleep ignored a cancelled context")
	}
}
