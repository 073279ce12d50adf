package main

import (
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

func TestSteadyTail(t *testing.T) {
	tests := []struct{ prior, window, want int }{
		{10000, 10, 4},   // half of 10, whole turns
		{10000, 0, 50},   // the config default window, 100
		{10000, 100, 50}, //
		{10, 100, 10},    // never more than the session
		{10000, 2, 2},    // at least one turn
	}
	for _, tt := range tests {
		if got := steadyTail(tt.prior, tt.window); got != tt.want {
			t.Errorf("steadyTail(%d, %d) = %d, want %d", tt.prior, tt.window, got, tt.want)
		}
	}
}

// A seeded session reads back as the daemon would have left it: every
// message, consolidated up to the tail, and the tail starting with a user
// message (a turn's start).
func TestSeedSessionsConsolidatesAllButTheTail(t *testing.T) {
	for _, tail := range []int{4, 100} {
		dir := t.TempDir()
		if err := seedSessions(2, 100, tail)(dir); err != nil {
			t.Fatal(err)
		}
		store := session.NewStore(dir, session.Options{}, zap.NewNop())
		snap, err := store.Get(sessionKey(chatID(1)))
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Messages) != 100 || snap.Consolidated != 100-tail {
			t.Fatalf("tail %d: %d messages, consolidated %d", tail, len(snap.Messages), snap.Consolidated)
		}
		if un := snap.Unconsolidated(); un[0].Role != llm.RoleUser {
			t.Errorf("tail %d starts with a %s message", tail, un[0].Role)
		}
		_ = store.Close()
	}
}
