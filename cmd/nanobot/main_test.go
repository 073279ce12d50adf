//go:build unix

package main

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// The first signal cancels the commands' context; stop ends the handler
// (the second signal's immediate exit is tested end to end).
func TestFirstSignalCancelsAndStopEndsTheHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := onSignals(cancel, nil)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	done := make(chan struct{})
	go func() {
		stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not end the signal handler")
	}

	// Without any signal, stop ends it too.
	_, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	onSignals(cancel2, nil)()
}
