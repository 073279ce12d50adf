package jsstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// stepClock starts at t0 and advances by a second per reading, so two
// stores driven through the same calls stamp the same times.
func stepClock() func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := now
		now = now.Add(time.Second)
		return t
	}
}

var cfg = config.NATSConfig{Prefix: "nbtest"}

// connect opens a connection to srv that reconnects for ever (as the
// daemon's does), closed when the test ends.
func connect(t *testing.T, srv *natsfake.Server) (natsbus.JetStreamer, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil }), js
}

// newStore is one "worker": its own connection and cache.
func newStore(t *testing.T, srv *natsfake.Server, opts jsstore.Options) *jsstore.Store {
	t.Helper()
	conn, _ := connect(t, srv)
	if opts.Clock == nil {
		opts.Clock = clock.Func(stepClock())
	}
	// The cache bounds of an empty config file, as the daemon passes them:
	// the store defaults neither.
	d := config.Defaults().Agents
	if opts.CacheSize == 0 {
		opts.CacheSize = d.SessionCache
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = d.SessionCacheBytes
	}
	s := jsstore.New(cfg, conn, opts, zaptest.NewLogger(t))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func userText(s string) llm.Message {
	m := llm.NewText(llm.RoleUser, s)
	m.Time = t0
	return m
}

func assistantText(s string) llm.Message {
	m := llm.NewText(llm.RoleAssistant, s)
	m.Time = t0
	return m
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustGet(t *testing.T, s interface {
	Get(string) (session.Snapshot, error)
}, key string) session.Snapshot {
	t.Helper()
	snap, err := s.Get(key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return snap
}

func texts(snap session.Snapshot) []string {
	var out []string
	for _, m := range snap.Messages {
		out = append(out, m.Text())
	}
	return out
}

// ops are the calls a session sees, run against the file store and the
// JetStream store alike.
type ops interface {
	Get(string) (session.Snapshot, error)
	Append(string, ...llm.Message) (session.Snapshot, error)
	Stage(string, ...llm.Message) (session.Snapshot, error)
	Sync(string) error
	SetMeta(string, session.MetaUpdate) error
	Archive(string) (string, error)
}

func ptr[T any](v T) *T { return &v }

// TestSameAsFileStore runs every op on both stores with the same clock and
// checks that the snapshots are equal, Size included: the records are the
// file's lines byte for byte. A fresh JetStream store reads the same back.
func TestSameAsFileStore(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	steps := []struct {
		name string
		do   func(s ops, key string) error
	}{
		{"get empty", func(s ops, key string) error { _, err := s.Get(key); return err }},
		{"stage user", func(s ops, key string) error {
			_, err := s.Stage(key, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("hi <b>&</b> ünï ✓")}})
			return err
		}},
		{"sync", func(s ops, key string) error { return s.Sync(key) }},
		{"append turn", func(s ops, key string) error {
			_, err := s.Append(key, sampleTurn()...)
			return err
		}},
		{"meta", func(s ops, key string) error {
			return s.SetMeta(key, session.MetaUpdate{Consolidated: ptr(2), Route: ptr("fast"), Title: ptr("Reports")})
		}},
		{"meta unchanged", func(s ops, key string) error {
			return s.SetMeta(key, session.MetaUpdate{Route: ptr("fast")})
		}},
		{"meta out of range", func(s ops, key string) error {
			err := s.SetMeta(key, session.MetaUpdate{Consolidated: ptr(99)})
			if err == nil {
				return errors.New("consolidated 99 accepted")
			}
			return nil
		}},
		{"invalid message", func(s ops, key string) error {
			_, err := s.Append(key, userText("ok"), llm.Message{Role: "robot"})
			if err == nil {
				return errors.New("invalid message accepted")
			}
			return nil
		}},
		{"append after meta", func(s ops, key string) error {
			_, err := s.Append(key, userText("more"), assistantText("sure"))
			return err
		}},
	}
	key := "telegram:42"
	file := session.NewStore(filepath.Join(t.TempDir(), "sessions"), session.Options{Clock: clock.Func(stepClock()), CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, zaptest.NewLogger(t))
	t.Cleanup(func() { _ = file.Close() })
	js := newStore(t, srv, jsstore.Options{})
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(file, key); err != nil {
				t.Fatalf("file store: %v", err)
			}
			if err := st.do(js, key); err != nil {
				t.Fatalf("jetstream store: %v", err)
			}
			want, got := mustGet(t, file, key), mustGet(t, js, key)
			// Memo is the file store's cache for what users derive, not
			// the session's content.
			want.Memo = nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("snapshots differ\n got: %s\nwant: %s", asJSON(t, got), asJSON(t, want))
			}
		})
	}
	fresh := mustGet(t, newStore(t, srv, jsstore.Options{}), key)
	if got, want := asJSON(t, fresh), asJSON(t, mustGet(t, js, key)); got != want {
		t.Fatalf("a fresh store reads back\n%s\nnot\n%s", got, want)
	}
}

// TestInvalidRejectedLikeFileStore: the same validation error, and nothing
// stored.
func TestInvalidRejectedLikeFileStore(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	file := session.NewStore(t.TempDir(), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, zaptest.NewLogger(t))
	t.Cleanup(func() { _ = file.Close() })
	js := newStore(t, srv, jsstore.Options{})
	cases := []struct {
		name string
		key  string
		msgs []llm.Message
	}{
		{"no role", "web:abc", []llm.Message{userText("fine"), {Parts: []llm.Part{llm.Text("x")}}}},
		{"unknown part", "web:abc", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: "hologram"}}}}},
		{"empty key", "", []llm.Message{userText("x")}},
		{"invalid utf-8 key", "web:\xff", []llm.Message{userText("x")}},
		{"key over 1024 bytes", "web:" + strings.Repeat("k", 1024), []llm.Message{userText("x")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ferr := file.Append(c.key, c.msgs...)
			_, jerr := js.Append(c.key, c.msgs...)
			if ferr == nil || jerr == nil {
				t.Fatalf("accepted: file %v, jetstream %v", ferr, jerr)
			}
			if ferr.Error() != jerr.Error() {
				t.Errorf("errors differ:\n file: %v\n   js: %v", ferr, jerr)
			}
		})
	}
	if got := mustGet(t, newStore(t, srv, jsstore.Options{}), "web:abc"); len(got.Messages) != 0 || got.Size != 0 {
		t.Fatalf("something was stored: %s", asJSON(t, got))
	}
}

// TestTwoWorkersRace: two stores (two workers) read one session, then both
// append at once, round after round. Both expect the same last record, so
// exactly one wins each round; the loser gets session.ErrConflict, has
// read the winner's record, and its retry lands after it. Every message
// ends up in the history exactly once, each round's winner before its loser.
func TestTwoWorkersRace(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	a, b := newStore(t, srv, jsstore.Options{}), newStore(t, srv, jsstore.Options{})
	workers := []*jsstore.Store{a, b}
	const key, rounds = "discord:7", 20
	var want []string
	for r := range rounds {
		for _, w := range workers {
			if err := w.Forget(key); err != nil {
				t.Fatal(err)
			}
			mustGet(t, w, key) // both now expect the same last record
		}
		errs := make([]error, len(workers))
		var wg sync.WaitGroup
		for i, w := range workers {
			wg.Go(func() { _, errs[i] = w.Append(key, userText(fmt.Sprintf("r%d w%d", r, i))) })
		}
		wg.Wait()
		var won, lost []int
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, i)
			case errors.Is(err, session.ErrConflict):
				lost = append(lost, i)
			default:
				t.Fatalf("round %d worker %d: %v", r, i, err)
			}
		}
		if len(won) != 1 || len(lost) != 1 {
			t.Fatalf("round %d: won %v, lost %v; want one each", r, won, lost)
		}
		// The loser read the winner's record with the conflict: the
		// retry is based on it and goes through.
		loser := workers[lost[0]]
		snap, err := loser.Append(key, userText(fmt.Sprintf("r%d w%d", r, lost[0])))
		if err != nil {
			t.Fatalf("round %d: retry: %v", r, err)
		}
		want = append(want, fmt.Sprintf("r%d w%d", r, won[0]), fmt.Sprintf("r%d w%d", r, lost[0]))
		if got := texts(snap); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: loser sees %q, want %q", r, got, want)
		}
	}
	got := texts(mustGet(t, newStore(t, srv, jsstore.Options{}), key))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestCommutingWritesRebased: what another worker wrote meanwhile decides
// whether a stale write is published after it or refused.
func TestCommutingWritesRebased(t *testing.T) {
	cases := []struct {
		name     string
		theirs   func(s *jsstore.Store, key string) error
		mine     func(s *jsstore.Store, key string) error
		conflict bool
	}{
		{"messages after meta", setTitle("theirs"), appendText("mine"), false},
		{"meta after messages", appendText("theirs"), setTitle("mine"), false},
		{"archive after meta", setTitle("theirs"), archive, false},
		{"messages after messages", appendText("theirs"), appendText("mine"), true},
		{"meta after meta", setTitle("theirs"), setTitle("mine"), true},
		{"messages after archive", archive, appendText("mine"), true},
		{"meta after archive", archive, setTitle("mine"), true},
		{"archive after messages", appendText("theirs"), archive, true},
	}
	srv := natsfake.Start(t, t.TempDir())
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("api:key:%d", i)
			a, b := newStore(t, srv, jsstore.Options{}), newStore(t, srv, jsstore.Options{})
			if _, err := a.Append(key, userText("start")); err != nil {
				t.Fatal(err)
			}
			mustGet(t, b, key) // b's view goes stale now
			if err := c.theirs(a, key); err != nil {
				t.Fatalf("theirs: %v", err)
			}
			err := c.mine(b, key)
			if got := errors.Is(err, session.ErrConflict); got != c.conflict || (err != nil && !got) {
				t.Fatalf("mine: %v; want conflict %v", err, c.conflict)
			}
			// Either way b now holds what the stream holds.
			want := mustGet(t, newStore(t, srv, jsstore.Options{}), key)
			got := mustGet(t, b, key)
			if asJSON(t, got) != asJSON(t, want) {
				t.Fatalf("b holds %s\nstream holds %s", asJSON(t, got), asJSON(t, want))
			}
		})
	}
}

func setTitle(title string) func(*jsstore.Store, string) error {
	return func(s *jsstore.Store, key string) error {
		return s.SetMeta(key, session.MetaUpdate{Title: &title})
	}
}

func appendText(text string) func(*jsstore.Store, string) error {
	return func(s *jsstore.Store, key string) error {
		_, err := s.Append(key, userText(text))
		return err
	}
}

func archive(s *jsstore.Store, key string) error {
	_, err := s.Archive(key)
	return err
}

// TestArchiveStartsFreshConversation: after Archive the session is empty
// everywhere, List leaves it out until it has a record again, and the
// archived records stay readable where Archive said.
func TestArchiveStartsFreshConversation(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := newStore(t, srv, jsstore.Options{})
	const key = "telegram:123"
	if where, err := s.Archive(key); err != nil || where != "" {
		t.Fatalf("archive of an empty session: %q, %v", where, err)
	}
	if _, err := s.Append(key, userText("old 1"), assistantText("old 2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta(key, session.MetaUpdate{Title: ptr("old")}); err != nil {
		t.Fatal(err)
	}
	where, err := s.Archive(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*jsstore.Store{"same": s, "fresh": newStore(t, srv, jsstore.Options{})} {
		if got := mustGet(t, st, key); len(got.Messages) != 0 || got.Title != "" || got.Size != 0 || !got.Created.IsZero() {
			t.Fatalf("%s store after archive: %s", name, asJSON(t, got))
		}
	}
	list, err := s.List()
	if err != nil || len(list) != 0 {
		t.Fatalf("list after archive: %v, %v", list, err)
	}
	snap, err := s.Append(key, userText("new"))
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(mustGet(t, newStore(t, srv, jsstore.Options{}), key)); !reflect.DeepEqual(got, []string{"new"}) || snap.Created.IsZero() {
		t.Fatalf("new conversation reads %q (created %v)", got, snap.Created)
	}

	// where is nats:<stream>/<subject>#<first>-<last>.
	var stream, subject string
	var first, last uint64
	if _, err := fmt.Sscanf(strings.NewReplacer(":", " ", "/", " ", "#", " ", "-", " ").Replace(where), "nats %s %s %d %d", &stream, &subject, &first, &last); err != nil {
		t.Fatalf("archive location %q: %v", where, err)
	}
	_, js := connect(t, srv)
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var archived strings.Builder
	for seq := first; seq <= last; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatalf("archived record %d: %v", seq, err)
		}
		archived.Write(m.Data)
	}
	for _, want := range []string{`"key":"telegram:123"`, "old 1", "old 2", `"title":"old"`} {
		if !strings.Contains(archived.String(), want) {
			t.Errorf("archived records lack %s:\n%s", want, archived.String())
		}
	}
}

func TestList(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := newStore(t, srv, jsstore.Options{})
	// An API session id of 128 '@' is a long key (a hashed file name in the
	// file store); the stream keeps it as well (issue 28, finding 5).
	keys := []string{"telegram:1", "web:abc", "api:key:id.with.dots", "api:webui:" + strings.Repeat("@", 128), "cli:local"}
	for _, k := range keys {
		if _, err := s.Append(k, userText("hello "+k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Archive("cli:local"); err != nil {
		t.Fatal(err)
	}
	list, err := newStore(t, srv, jsstore.Options{}).List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]session.Info{}
	for _, in := range list {
		got[in.Key] = in
	}
	if len(got) != 4 {
		t.Fatalf("list %v, want the 4 live sessions", list)
	}
	for _, k := range keys[:4] {
		in, ok := got[k]
		snap := mustGet(t, s, k)
		if !ok || in.Size != snap.Size || in.ModTime.IsZero() || !strings.HasPrefix(in.Path, "nats:NBTEST_SESSIONS/nbtest.session.") {
			t.Errorf("%s: %+v (size want %d)", k, in, snap.Size)
		}
	}
}

// TestServerRestartKeepsSessions: a NATS restart with its store keeps every
// record; a store in use reconnects and appends after them.
func TestServerRestartKeepsSessions(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := newStore(t, srv, jsstore.Options{})
	const key = "telegram:9"
	if _, err := s.Append(key, userText("before")); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if _, err := s.Append(key, assistantText("after")); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
	if got := texts(mustGet(t, newStore(t, srv, jsstore.Options{}), key)); !reflect.DeepEqual(got, []string{"before", "after"}) {
		t.Fatalf("after restart: %q", got)
	}
}

// TestForgetReadsOtherWorkersRecords: a worker that takes a chat's message
// calls Forget and then sees what another worker appended.
func TestForgetReadsOtherWorkersRecords(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	a, b := newStore(t, srv, jsstore.Options{}), newStore(t, srv, jsstore.Options{})
	const key = "web:xyz"
	mustGet(t, a, key)
	if _, err := b.Append(key, userText("from b")); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, a, key); len(got.Messages) != 0 {
		t.Fatalf("cached view changed without Forget: %q", texts(got))
	}
	if err := a.Forget(key); err != nil {
		t.Fatal(err)
	}
	if got := texts(mustGet(t, a, key)); !reflect.DeepEqual(got, []string{"from b"}) {
		t.Fatalf("after Forget: %q", got)
	}
	if _, err := a.Append(key, assistantText("from a")); err != nil {
		t.Fatalf("append after Forget: %v", err)
	}
}

// TestCacheBoundByBytes: the byte budget drops idle sessions the count
// would keep, and a session over the whole budget is not kept after its
// call; both read back whole.
func TestCacheBoundByBytes(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := newStore(t, srv, jsstore.Options{CacheSize: 100, CacheBytes: 10_000})
	big := strings.Repeat("x", 4000)
	for i := range 3 {
		if _, err := s.Append(fmt.Sprintf("web:%d", i), userText(big)); err != nil {
			t.Fatal(err)
		}
	}
	if n, w := s.Cached(), s.CachedBytes(); n != 2 || w > 10_000 {
		t.Fatalf("cached %d sessions of %d bytes; want 2 within 10000", n, w)
	}
	if _, err := s.Append("web:huge", userText(strings.Repeat("y", 20_000))); err != nil {
		t.Fatal(err)
	}
	if w := s.CachedBytes(); w > 10_000 {
		t.Errorf("cache weighs %d bytes after a session over the budget", w)
	}
	if got := texts(mustGet(t, s, "web:0")); !reflect.DeepEqual(got, []string{big}) {
		t.Errorf("evicted session reads %d messages", len(got))
	}
}

func TestCacheBoundAndClose(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	s := newStore(t, srv, jsstore.Options{CacheSize: 2})
	for i := range 5 {
		if _, err := s.Append(fmt.Sprintf("web:%d", i), userText("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Cached(); n != 2 {
		t.Fatalf("cached %d, want 2", n)
	}
	if got := texts(mustGet(t, s, "web:0")); !reflect.DeepEqual(got, []string{"x"}) {
		t.Fatalf("evicted session reads %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("web:0"); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
}

// lossyJS stores the first lose publishes but reports them lost, as when
// NATS restarts between storing a record and acknowledging it.
type lossyJS struct {
	jetstream.JetStream
	mu   sync.Mutex
	lose int
}

func (l *lossyJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := l.JetStream.PublishMsg(ctx, msg, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lose > 0 {
		l.lose--
		return nil, nats.ErrTimeout
	}
	return ack, err
}

// TestLostAcknowledgementStoredOnce: the write is published again, refused
// as stale because the first attempt was stored, and recognised by its id:
// the caller sees success and the record is there once.
func TestLostAcknowledgementStoredOnce(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	_, js := connect(t, srv)
	lossy := &lossyJS{JetStream: js}
	s := jsstore.New(cfg, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) { return lossy, nil }),
		jsstore.Options{Clock: clock.Func(stepClock()), CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, zaptest.NewLogger(t))
	t.Cleanup(func() { _ = s.Close() })
	const key = "telegram:5"
	for _, text := range []string{"one", "two"} {
		lossy.mu.Lock()
		lossy.lose = 1
		lossy.mu.Unlock()
		if _, err := s.Append(key, userText(text)); err != nil {
			t.Fatalf("append %s: %v", text, err)
		}
	}
	if err := s.SetMeta(key, session.MetaUpdate{Title: ptr("t")}); err != nil {
		t.Fatal(err)
	}
	want := []string{"one", "two"}
	for name, st := range map[string]*jsstore.Store{"same": s, "fresh": newStore(t, srv, jsstore.Options{})} {
		if got := mustGet(t, st, key); !reflect.DeepEqual(texts(got), want) || got.Title != "t" {
			t.Fatalf("%s store reads %q, title %q", name, texts(got), got.Title)
		}
	}
}
