package discord_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels/cursorkv"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// kvCursors is the cursor store a channels process on the NATS bus gets
// (internal/daemon): the KV bucket, over a connection of its own.
func kvCursors(t *testing.T, url string) discord.CursorStore {
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
	return cursorkv.New(config.NATSConfig{Prefix: "test"}, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) {
		return js, nil
	}), cursorkv.Options{Key: "discord"}, zaptest.NewLogger(t))
}

// TestCatchUpWithCursorsInKVOnAnotherHost restarts the adapter with a fresh,
// empty data dir, as a channels process moved to another host: the cursors
// in KV still bring back what was posted while it was down.
func TestCatchUpWithCursorsInKVOnAnotherHost(t *testing.T) {
	t.Parallel()
	srv := natsfake.Start(t, t.TempDir())
	first := t.TempDir()
	e := start(t, setup{dataDir: first, agent: echo, deps: func(d *discord.Deps) { d.Cursors = kvCursors(t, srv.URL()) }})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "one"})
	e.receivedIs("one")
	e.fake.WaitMessages(t, dm, 1)
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "two"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "three"})

	fresh := t.TempDir()
	e2 := start(t, setup{server: e.fake, dataDir: fresh, agent: echo, deps: func(d *discord.Deps) { d.Cursors = kvCursors(t, srv.URL()) }})
	if got, want := e2.receivedBy(2)[dm], []string{"two", "three"}; !slices.Equal(got, want) {
		t.Errorf("caught up %q, want %q", got, want)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "four"})
	e2.receivedIs("four")
	e.fake.WaitMessages(t, dm, 4)
	if said, want := botSaid(e.fake, dm), []string{"echo: one", "echo: two", "echo: three", "echo: four"}; !slices.Equal(said, want) {
		t.Errorf("the bot said %q, want %q (each once)", said, want)
	}
	for _, dir := range []string{first, fresh} {
		if _, err := os.Stat(filepath.Join(dir, discord.CursorFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in the data dir (err %v): the cursors belong in KV", discord.CursorFile, err)
		}
	}
}
