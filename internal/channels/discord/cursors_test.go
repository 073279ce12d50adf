package discord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

func testCursors(t *testing.T, now *time.Time) *cursors {
	t.Helper()
	return newCursors(FileCursorStore{Path: filepath.Join(t.TempDir(), CursorFile)}, func() time.Time { return *now }, zaptest.NewLogger(t))
}

// step is one event in a chat's life.
type step struct {
	do       string // seen, track, ack, freeze, release
	id       uint64
	wantSeen bool // for seen: the message is new
}

func TestCursorsDoneOnlyPassesHandledMessages(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		wantDone    uint64
		wantHandled []uint64
	}{
		{
			name:     "answered in order",
			steps:    []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "ack", id: 10}, {do: "seen", id: 12, wantSeen: true}, {do: "ack", id: 12}},
			wantDone: 12,
		},
		{
			name: "an older message still pending holds done below it",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "seen", id: 11, wantSeen: true},
				{do: "ack", id: 11}},
			wantDone: 9, wantHandled: []uint64{11},
		},
		{
			name: "the pending one answered: done jumps over both",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "seen", id: 11, wantSeen: true},
				{do: "ack", id: 11}, {do: "ack", id: 10}},
			wantDone: 11,
		},
		{
			name: "a redelivery or a caught-up copy is not new",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "seen", id: 10, wantSeen: false},
				{do: "seen", id: 11, wantSeen: true}, {do: "ack", id: 11}, {do: "seen", id: 11, wantSeen: false},
				{do: "ack", id: 10}, {do: "seen", id: 9, wantSeen: false}},
			wantDone: 11,
		},
		{
			name: "while a catch-up is due done does not move",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "ack", id: 10}, {do: "freeze"},
				{do: "seen", id: 20, wantSeen: true}, {do: "ack", id: 20}},
			wantDone: 10, wantHandled: []uint64{20},
		},
		{
			name: "the catch-up found 15; done passes 20 only once 15 is answered",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "ack", id: 10}, {do: "freeze"},
				{do: "seen", id: 20, wantSeen: true}, {do: "ack", id: 20}, {do: "seen", id: 15, wantSeen: true},
				{do: "seen", id: 20, wantSeen: false}, {do: "release"}},
			wantDone: 10, wantHandled: []uint64{20},
		},
		{
			name: "and then it does",
			steps: []step{{do: "seen", id: 10, wantSeen: true}, {do: "track", id: 10}, {do: "ack", id: 10}, {do: "freeze"},
				{do: "seen", id: 20, wantSeen: true}, {do: "ack", id: 20}, {do: "seen", id: 15, wantSeen: true},
				{do: "release"}, {do: "ack", id: 15}},
			wantDone: 20,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Now()
			cs := testCursors(t, &now)
			for i, s := range tt.steps {
				switch s.do {
				case "seen":
					if got := cs.seen("c", s.id, ""); got != s.wantSeen {
						t.Fatalf("step %d: seen(%d) = %v, want %v", i, s.id, got, s.wantSeen)
					}
				case "track":
					cs.track("c", s.id)
				case "ack":
					cs.ack("c", s.id)
				case "freeze":
					cs.freeze()
				case "release":
					cs.release("c")
				}
			}
			c := cs.chats["c"]
			if c == nil {
				t.Fatal("the chat was dropped")
			}
			if c.done != tt.wantDone || !slices.Equal(c.handled, tt.wantHandled) {
				t.Errorf("done %d handled %v, want %d %v", c.done, c.handled, tt.wantDone, tt.wantHandled)
			}
		})
	}
}

func TestCursorsOnlyTrackedChatsAreKept(t *testing.T) {
	now := time.Now()
	cs := testCursors(t, &now)
	// A guild channel where nobody addressed the bot: followed while a
	// message is in hand, then forgotten.
	cs.seen("chatter", 5, "g")
	cs.ack("chatter", 5)
	if _, ok := cs.chats["chatter"]; ok {
		t.Error("an untracked chat is kept after its message was handled")
	}
	cs.seen("dm", 7, "")
	cs.track("dm", 7)
	cs.ack("dm", 7)
	if err := cs.save(); err != nil {
		t.Fatal(err)
	}

	again := newCursors(cs.store, cs.now, cs.log)
	if err := again.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	jobs := again.due()
	if len(jobs) != 1 || jobs[0].chat != "dm" || jobs[0].after != 7 {
		t.Fatalf("after a restart, due = %+v, want the DM after 7", jobs)
	}
	if again.seen("dm", 7, "") {
		t.Error("a handled message is new again after a restart")
	}
}

func TestCursorsForgetIdleChatsAndBoundTheirNumber(t *testing.T) {
	now := time.Now()
	cs := testCursors(t, &now)
	for i := range maxTracked + 10 {
		chat := string(rune('A'+i%26)) + time.Duration(i).String()
		cs.seen(chat, uint64(100+i), "")
		cs.track(chat, uint64(100+i))
		cs.ack(chat, uint64(100+i))
		now = now.Add(time.Second)
	}
	cs.freeze()
	if n := len(cs.due()); n != maxTracked {
		t.Errorf("%d chats due, want the %d most recent", n, maxTracked)
	}
	now = now.Add(25 * time.Hour)
	if n := len(cs.due()); n != maxTracked {
		t.Errorf("%d chats due after a day of silence, want %d: a quiet chat may still get a message while the bot is away", n, maxTracked)
	}
	now = now.Add(forgetAfter)
	if n := len(cs.due()); n != 0 {
		t.Errorf("%d chats due after a month of silence, want 0", n)
	}
}

func TestCursorsCorruptFileIsReportedNotFatal(t *testing.T) {
	now := time.Now()
	cs := testCursors(t, &now)
	if err := os.WriteFile(cs.store.(FileCursorStore).Path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cs.load(context.Background()); err == nil {
		t.Fatal("a corrupt file loaded without an error")
	}
	if !cs.seen("c", 1, "") {
		t.Error("the cursors do not work after a corrupt file")
	}
}

func TestSnowflakeAt(t *testing.T) {
	// Discord's documented example: 175928847299117063 was made at
	// 2016-04-30 11:18:25.796 UTC.
	at := time.Date(2016, 4, 30, 11, 18, 25, 796e6, time.UTC)
	if got, id := snowflakeAt(at), uint64(175928847299117063); got > id || id-got >= 1<<22 {
		t.Errorf("snowflakeAt(%v) = %d, want the smallest id of that millisecond (%d)", at, got, id>>22<<22)
	}
	if snowflakeAt(time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)) != 0 {
		t.Error("a time before Discord's epoch is not 0")
	}
}

func TestCursorsHoldLiveMessagesUntilTheCatchUpIsDone(t *testing.T) {
	now := time.Now()
	cs := testCursors(t, &now)
	cs.seen("c", 10, "")
	cs.track("c", 10)
	cs.ack("c", 10)
	if cs.hold("c", func() {}) {
		t.Fatal("held a message with no catch-up due")
	}
	cs.freeze()
	var order []int
	for i := range 3 {
		if !cs.hold("c", func() { order = append(order, i) }) {
			t.Fatalf("message %d not held while a catch-up is due", i)
		}
	}
	// Even a chat idle for longer than forgetAfter keeps what it holds.
	now = now.Add(2 * forgetAfter)
	if jobs := cs.due(); len(jobs) != 1 || jobs[0].after != 10 {
		t.Fatalf("due = %+v", jobs)
	}
	for _, fn := range cs.release("c") {
		fn()
	}
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("held messages ran as %v, want in arrival order", order)
	}
	if cs.hold("c", func() {}) {
		t.Error("held a message after the catch-up")
	}
}

func TestCursorsBoundTheHandledList(t *testing.T) {
	now := time.Now()
	cs := testCursors(t, &now)
	cs.seen("c", 1, "")
	cs.track("c", 1) // 1 stays pending: done cannot pass it
	for id := uint64(2); id < maxHandled+12; id++ {
		cs.seen("c", id, "")
		cs.ack("c", id)
	}
	c := cs.chats["c"]
	if len(c.handled) != maxHandled || c.handled[len(c.handled)-1] != maxHandled+11 {
		t.Errorf("handled holds %d ids ending %d, want the newest %d", len(c.handled), c.handled[len(c.handled)-1], maxHandled)
	}
	if c.done != 0 {
		t.Errorf("done = %d, want 0: message 1 is still pending", c.done)
	}
}

// flakyStore fails saves while down is set, like a KV store while NATS is
// unreachable, and records what it stored.
type flakyStore struct {
	mu    sync.Mutex
	down  bool
	saved []byte
}

func (f *flakyStore) Load(context.Context) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saved, f.saved != nil, nil
}

func (f *flakyStore) Save(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("nats: no responders available for request")
	}
	f.saved = slices.Clone(data)
	return nil
}

func TestCursorsFailedSaveIsLoggedAndRetried(t *testing.T) {
	now := time.Now()
	store := &flakyStore{down: true}
	core, logs := observer.New(zap.ErrorLevel)
	cs := newCursors(store, func() time.Time { return now }, zap.New(core))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cs.writer(ctx) }()
	defer func() { stop(); <-done }()

	cs.seen("c", 10, "")
	cs.track("c", 10)
	for logs.FilterMessage("discord cursors not saved").Len() == 0 {
		runtime.Gosched() // the writer tries and fails; it must not stop
	}
	store.mu.Lock()
	store.down = false
	store.mu.Unlock()
	cs.ack("c", 10) // the next change saves everything, the failed change too
	stop()
	<-done
	again := newCursors(store, cs.now, zaptest.NewLogger(t))
	if err := again.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again.seen("c", 10, "") {
		t.Error("message 10 is new after the restart: the save after the failure did not happen")
	}
}
