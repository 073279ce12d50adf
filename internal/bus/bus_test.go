package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestOrderPreserved(t *testing.T) {
	b := New(4)
	ctx := context.Background()
	go func() {
		for i := 0; i < 100; i++ {
			if err := b.PublishInbound(ctx, InboundMessage{Channel: "t", ChatID: "1", MessageID: string(rune('a' + i%26)), Content: string(rune(i))}); err != nil {
				t.Errorf("publish: %v", err)
			}
		}
		b.CloseInbound()
	}()
	i := 0
	for m := range b.Inbound() {
		if m.Content != string(rune(i)) {
			t.Fatalf("message %d arrived as %q", i, m.Content)
		}
		i++
	}
	if i != 100 {
		t.Fatalf("got %d messages, want 100", i)
	}
}

func TestPublishBlocksWhenFullUntilContextEnds(t *testing.T) {
	b := New(1)
	if err := b.PublishOutbound(context.Background(), OutboundMessage{Content: "1"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.PublishOutbound(ctx, OutboundMessage{Content: "2"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish on a full queue = %v, want deadline exceeded", err)
	}
}

func TestCloseReleasesBlockedPublishers(t *testing.T) {
	b := New(1)
	_ = b.PublishInbound(context.Background(), InboundMessage{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.PublishInbound(context.Background(), InboundMessage{})
		}()
	}
	time.Sleep(10 * time.Millisecond) // let them block; correctness does not depend on it
	b.CloseInbound()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("blocked publisher got %v, want ErrClosed", err)
		}
	}
	// The message queued before Close is still delivered.
	if _, ok := <-b.Inbound(); !ok {
		t.Fatal("queued message lost on close")
	}
	if _, ok := <-b.Inbound(); ok {
		t.Fatal("inbound not closed")
	}
	// Outbound still works: shutdown drains replies after intake stopped.
	if err := b.PublishOutbound(context.Background(), OutboundMessage{}); err != nil {
		t.Fatalf("outbound after inbound close: %v", err)
	}
	b.Close()
	b.Close() // idempotent
	if err := b.PublishOutbound(context.Background(), OutboundMessage{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close = %v", err)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		m    InboundMessage
		want string
	}{
		{InboundMessage{Channel: "telegram", ChatID: "42"}, "telegram:42"},
		{InboundMessage{Channel: "telegram", ChatID: "42", SessionKey: "telegram:42:topic:7"}, "telegram:42:topic:7"},
	}
	for _, tt := range tests {
		if got := tt.m.Key(); got != tt.want {
			t.Errorf("Key() = %q, want %q", got, tt.want)
		}
	}
}

func BenchmarkHandOff(b *testing.B) {
	bus := New(1024)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		for range bus.Inbound() {
		}
		close(done)
	}()
	m := InboundMessage{Channel: "telegram", ChatID: "1", Content: "hello"}
	b.ReportAllocs()
	for b.Loop() {
		_ = bus.PublishInbound(ctx, m)
	}
	bus.CloseInbound()
	<-done
}
