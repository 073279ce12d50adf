package cursorkv_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels/cursorkv"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// open returns a store as one process would build it: its own connection
// to url (reconnecting forever), closed at the test's cleanup.
func open(t *testing.T, url string, opts cursorkv.Options, log *zap.Logger) *cursorkv.Store {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Key == "" {
		opts.Key = "discord"
	}
	return cursorkv.New(config.NATSConfig{Prefix: "test"}, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) {
		return js, nil
	}), opts, log)
}

func load(t *testing.T, s *cursorkv.Store) (string, bool) {
	t.Helper()
	data, found, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return string(data), found
}

func save(t *testing.T, s *cursorkv.Store, doc string) {
	t.Helper()
	if err := s.Save(context.Background(), []byte(doc)); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	a := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	if doc, found := load(t, a); found {
		t.Fatalf("an empty bucket loaded %q", doc)
	}
	save(t, a, `{"version":1}`)
	save(t, a, `{"version":2}`)
	// Another key of the bucket is another channel's.
	other := open(t, srv.URL(), cursorkv.Options{Key: "other"}, zaptest.NewLogger(t))
	if doc, found := load(t, other); found {
		t.Fatalf("another key loaded %q", doc)
	}
	// A process started on another host, after a NATS restart (file storage).
	srv.Restart()
	b := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	if doc, found := load(t, b); !found || doc != `{"version":2}` {
		t.Fatalf("loaded %q (found %v), want the last save", doc, found)
	}
	save(t, b, `{"version":3}`) // on the revision it read: no conflict
}

func TestImportsTheFileOnce(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "discord-cursors.json")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	a := open(t, srv.URL(), cursorkv.Options{ImportFile: file}, zap.New(core))
	if doc, found := load(t, a); !found || doc != `{"from":"file"}` {
		t.Fatalf("first start loaded %q (found %v), want the file", doc, found)
	}
	if n := logs.FilterMessage("imported the cursor file into KV").Len(); n != 1 {
		t.Errorf("the import was logged %d times, want once", n)
	}
	save(t, a, `{"from":"kv"}`)
	// The file is still there (left for a rollback); the bucket wins.
	b := open(t, srv.URL(), cursorkv.Options{ImportFile: file}, zap.New(core))
	if doc, _ := load(t, b); doc != `{"from":"kv"}` {
		t.Fatalf("second start loaded %q, want the bucket's value, not the file again", doc)
	}
	if n := logs.FilterMessage("imported the cursor file into KV").Len(); n != 1 {
		t.Errorf("the import was logged %d times, want once", n)
	}
}

func TestCorruptFileIsNotImported(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "discord-cursors.json")
	if err := os.WriteFile(file, []byte(`{not json`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, srv.URL(), cursorkv.Options{ImportFile: file}, zaptest.NewLogger(t))
	if doc, found := load(t, s); found {
		t.Fatalf("loaded %q from a corrupt file", doc)
	}
	save(t, s, `{}`)
}

func TestSaveFailsWhileNATSIsDownThenSucceeds(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	load(t, s)
	save(t, s, `{"n":1}`)
	srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := s.Save(ctx, []byte(`{"n":2}`))
	cancel()
	if err == nil {
		t.Fatal("a save with NATS down reported success")
	}
	srv.Restart()
	// The client reconnects in its own time; the channel saves again at
	// its next change, as this loop does.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.Save(ctx, []byte(`{"n":3}`))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("save after NATS came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fresh := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	if doc, _ := load(t, fresh); doc != `{"n":3}` {
		t.Fatalf("loaded %q, want the save made after NATS came back", doc)
	}
}

func TestTwoWritersAreReported(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	core, logs := observer.New(zap.ErrorLevel)
	a := open(t, srv.URL(), cursorkv.Options{}, zap.New(core))
	b := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	load(t, a)
	load(t, b)
	save(t, a, `{"by":"a"}`)
	save(t, b, `{"by":"b"}`) // b created nothing it read: a conflict too
	save(t, a, `{"by":"a2"}`)
	if logs.Len() == 0 {
		t.Error("a's save over b's value was not reported")
	}
	fresh := open(t, srv.URL(), cursorkv.Options{}, zaptest.NewLogger(t))
	if doc, _ := load(t, fresh); doc != `{"by":"a2"}` {
		t.Fatalf("loaded %q, want the last save", doc)
	}
}
