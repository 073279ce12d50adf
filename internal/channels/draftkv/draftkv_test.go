package draftkv_test

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/draftkv"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// open returns a record as one process builds it, on its own connection.
func open(t *testing.T, url string) *draftkv.Store {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return draftkv.New(config.NATSConfig{Prefix: "test"}, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) {
		return js, nil
	}))
}

// What one process remembers, the next one (another connection, as after a
// restart) recalls; a turn's record is its own, per channel; no refs
// forgets it; a turn id that is no valid key still works.
func TestRememberedByOneRecalledByTheNext(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	ctx := context.Background()
	first, next := open(t, srv.URL()), open(t, srv.URL())
	refs := []channels.Sent{{ChatID: "100", MessageID: "7"}, {ChatID: "100", MessageID: "8"}}
	for _, turn := range []string{"a1b2c3d4e5f6", "odd id: with spaces/and.dots"} {
		if err := first.Remember(ctx, "telegram", turn, refs); err != nil {
			t.Fatal(err)
		}
		got, err := next.Recall(ctx, "telegram", turn)
		if err != nil || !slices.Equal(got, refs) {
			t.Errorf("turn %q: recalled %v (err %v), want %v", turn, got, err, refs)
		}
		if got, err := next.Recall(ctx, "discord", turn); err != nil || got != nil {
			t.Errorf("turn %q on another channel: %v (err %v), want none", turn, got, err)
		}
		if err := first.Remember(ctx, "telegram", turn, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := next.Recall(ctx, "telegram", turn); err != nil || got != nil {
			t.Errorf("turn %q forgotten: %v (err %v), want none", turn, got, err)
		}
	}
	if err := first.Remember(ctx, "telegram", "never-had-one", nil); err != nil {
		t.Errorf("forgetting a turn without a record: %v", err)
	}
}
