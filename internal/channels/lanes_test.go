package channels

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLanesOrderPerKeyParallelAcrossKeys(t *testing.T) {
	l := NewLanes(100)
	ctx := context.Background()
	var mu sync.Mutex
	got := map[string][]int{}
	block := make(chan struct{})
	for i := range 5 {
		_ = l.Go(ctx, "slow", func() {
			<-block
			mu.Lock()
			got["slow"] = append(got["slow"], i)
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	for i := range 5 {
		_ = l.Go(ctx, "fast", func() {
			mu.Lock()
			got["fast"] = append(got["fast"], i)
			n := len(got["fast"])
			mu.Unlock()
			if n == 5 {
				close(done)
			}
		})
	}
	select {
	case <-done: // the fast lane finished while the slow one is blocked
	case <-time.After(5 * time.Second):
		t.Fatal("fast lane blocked behind the slow one")
	}
	close(block)
	l.Close()
	for _, k := range []string{"slow", "fast"} {
		for i, v := range got[k] {
			if v != i {
				t.Fatalf("lane %s ran out of order: %v", k, got[k])
			}
		}
	}
	if err := l.Go(ctx, "x", func() {}); !errors.Is(err, ErrLanesClosed) {
		t.Fatalf("Go after Close = %v", err)
	}
}

func TestLanesBounded(t *testing.T) {
	l := NewLanes(2)
	block := make(chan struct{})
	ctx := context.Background()
	_ = l.Go(ctx, "a", func() { <-block })
	_ = l.Go(ctx, "b", func() { <-block })
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Go(short, "c", func() {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Go with two pending = %v, want it to wait", err)
	}
	close(block)
	l.Close()
}
