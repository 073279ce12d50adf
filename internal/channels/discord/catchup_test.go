package discord_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

// restart stops e and starts the adapter again on the same fake Discord
// and data directory, as after the daemon was down.
func restart(t *testing.T, e *env, dataDir string, s setup) *env {
	t.Helper()
	if err := e.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.server, s.dataDir = e.fake, dataDir
	return start(t, s)
}

// receivedBy collects n messages the stand-in agent got, by chat.
func (e *env) receivedBy(n int) map[string][]string {
	e.t.Helper()
	got := map[string][]string{}
	for range n {
		m := e.received()
		got[m.ChatID] = append(got[m.ChatID], m.Content)
	}
	return got
}

func botSaid(f *discordfake.Server, channel string) []string {
	var out []string
	for _, m := range f.Messages(channel) {
		if !m.Deleted {
			out = append(out, m.Content)
		}
	}
	return out
}

func TestCatchUpAnswersWhatWasPostedWhileTheBotWasDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, setup{dataDir: dir, agent: echo})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	_, general, carol := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "one"})
	e.receivedIs("one")
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: e.mention() + " hello"})
	e.receivedIs("hello")
	e.fake.WaitMessages(t, dm, 1)
	e.fake.WaitMessages(t, general, 1)

	// The bot is down: Discord keeps the messages but will not deliver them.
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "two"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: "just chatting, no mention"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "three"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: e.mention() + " are you there?"})

	e2 := start(t, setup{server: e.fake, dataDir: dir, agent: echo})
	got := e2.receivedBy(3)
	if want := []string{"two", "three"}; !slices.Equal(got[dm], want) {
		t.Errorf("DM caught up as %q, want %q", got[dm], want)
	}
	if want := []string{"are you there?"}; !slices.Equal(got[general], want) {
		t.Errorf("guild channel caught up as %q, want %q (a message not addressed to the bot stays unanswered)", got[general], want)
	}
	// Nothing else was taken up: the next message the agent gets is new.
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "four"})
	e2.receivedIs("four")
	e.fake.WaitMessages(t, dm, 4)
	if said, want := botSaid(e.fake, dm), []string{"echo: one", "echo: two", "echo: three", "echo: four"}; !slices.Equal(said, want) {
		t.Errorf("the bot said %q in the DM, want %q (each once)", said, want)
	}
}

func TestCatchUpDoesNotRepeatAnswersAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, setup{dataDir: dir, agent: echo})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	for _, text := range []string{"a", "b", "c"} {
		e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: text})
		e.receivedIs(text)
	}
	e.fake.WaitMessages(t, dm, 3)
	for range 2 {
		e = restart(t, e, dir, setup{agent: echo})
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "d"})
	e.receivedIs("d") // not a, b or c again
	e.fake.WaitMessages(t, dm, 4)
	if said := botSaid(e.fake, dm); len(said) != 4 {
		t.Errorf("the bot said %q, want 4 answers", said)
	}
}

func TestCatchUpLooksBackOnlyAsFarAsConfigured(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	window := func(c *discord.Config) { c.CatchUp = 200 * time.Millisecond }
	e := start(t, setup{dataDir: dir, agent: echo, cfg: window})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "hi"})
	e.receivedIs("hi")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "long ago"})
	// The fake stamps message ids with its real clock: this puts 300 ms
	// between the two (a sleep of at least that, not a wait for anything).
	time.Sleep(300 * time.Millisecond)
	justNow := time.Now()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "just now"})

	// The restarted adapter's clock stands 100 ms after "just now", however
	// long the restart takes on a loaded machine: its 200 ms window holds
	// "just now" and not "long ago".
	frozen := func(d *discord.Deps) { d.Clock = frozenClock{at: justNow.Add(100 * time.Millisecond)} }
	e2 := start(t, setup{server: e.fake, dataDir: dir, agent: echo, cfg: window, deps: frozen})
	e2.receivedIs("just now")
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "live"})
	e2.receivedIs("live")
}

func TestCatchUpOfAnUnreadableChatIsGivenUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, setup{dataDir: dir, agent: echo})
	_, general, carol := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: e.mention() + " hi"})
	e.receivedIs("hi")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	// The bot lost Read Message History in the channel while it was down.
	e.fake.DenyHistory(general)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: e.mention() + " missed"})

	e2 := start(t, setup{server: e.fake, dataDir: dir, agent: echo})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: carol, Content: e.mention() + " live"})
	e2.receivedIs("live")
	if n := countRequests(e.fake, discordfake.RouteListMessages); n != 1 {
		t.Errorf("%d history fetches, want 1 (a 403 is not retried)", n)
	}
}

func countRequests(f *discordfake.Server, route string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Route == route {
			n++
		}
	}
	return n
}

// The catch-up hands messages to the same gates as live ones: a stranger
// is still refused and costs no turn.
func TestCaughtUpMessagesPassTheSameGates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var owner discordfake.User
	allow := func(c *discord.Config) { c.AllowFrom = []string{owner.ID} }
	s := setup{dataDir: dir, agent: echo, cfg: allow, before: func(f *discordfake.Server) { owner = f.NewUser("owner") }}
	e := start(t, s)
	_, general, stranger := e.guild()
	strangerDM := e.fake.AddDM(stranger)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: strangerDM, Author: stranger, Content: "hello?"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: owner, Content: e.mention() + " hi"})
	e.receivedIs("hi")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	// A stranger's chat is not remembered (strangers could otherwise
	// crowd the owner's chats out of the catch-up).
	data, err := os.ReadFile(filepath.Join(dir, discord.CursorFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), general) || strings.Contains(string(data), strangerDM) {
		t.Errorf("cursors %s: want the guild channel, not the stranger's DM", data)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: stranger, Content: e.mention() + " let me in"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: general, Author: owner, Content: e.mention() + " back?"})

	s.server, s.before = e.fake, nil // the same owner
	e2 := start(t, s)
	if m := e2.received(); m.Content != "back?" || m.SenderID != owner.ID {
		t.Errorf("the agent got %q from %s, want the owner's message only", m.Content, m.SenderID)
	}
	assertNoMore(t, e2)
}

func assertNoMore(t *testing.T, e *env) {
	t.Helper()
	select {
	case m := <-e.got:
		t.Errorf("unexpected message for the agent: %q", m.Content)
	case <-time.After(200 * time.Millisecond):
	}
}

// recordingClock is instantClock noting every wait asked of it.
type recordingClock struct {
	instantClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.instantClock.NewTimer(d)
}

func (c *recordingClock) count(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.waits {
		if w == d {
			n++
		}
	}
	return n
}

// The fetches of a catch-up are paced, to stay under Discord's global rate
// limit: two per chat (the newest page up to the cursor, for missed edits,
// and what was posted after it) with a pause between them, and one pause
// between two chats.
func TestCatchUpIsPaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, setup{dataDir: dir, agent: echo})
	alice, bob := e.fake.NewUser("alice"), e.fake.NewUser("bob")
	dmA, dmB := e.fake.AddDM(alice), e.fake.AddDM(bob)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dmA, Author: alice, Content: "a"})
	e.receivedIs("a")
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dmB, Author: bob, Content: "b"})
	e.receivedIs("b")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dmA, Author: alice, Content: "a2"})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dmB, Author: bob, Content: "b2"})

	clk := &recordingClock{}
	e2 := start(t, setup{server: e.fake, dataDir: dir, agent: echo, deps: func(d *discord.Deps) { d.Clock = clk }})
	got := e2.receivedBy(2)
	if len(got[dmA]) != 1 || len(got[dmB]) != 1 {
		t.Fatalf("caught up %v, want one message in each DM", got)
	}
	if n := clk.count(50 * time.Millisecond); n != 3 {
		t.Errorf("%d pauses of 50 ms between fetches, want 3 (two chats of two fetches)", n)
	}
	if n := countRequests(e.fake, discordfake.RouteListMessages); n != 4 {
		t.Errorf("%d history fetches, want 4", n)
	}
}

// frozenClock is instantClock stopped at one instant, which the catch-up
// window is measured from.
type frozenClock struct {
	instantClock
	at time.Time
}

func (c frozenClock) Now() time.Time { return c.at }

// Edits made while the bot was away are caught up like live MESSAGE_UPDATEs
// (docs/channels.md#edited-messages): an edit of a message it had answered
// becomes a correction, in the order it was made among the new messages; a
// message posted and edited while it was away is one message, as it reads
// now; an edit handled live is not taken up again after a restart.
func TestCatchUpTakesUpEditsMadeWhileTheBotWasDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, setup{dataDir: dir, agent: echo})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	first := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "meet at 5"})
	e.receivedIs("meet at 5")
	live := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "bring tea"})
	e.receivedIs("bring tea")
	e.fake.SendMessageUpdate(live, "bring coffee")
	e.receivedIs("[edited an earlier message; it now reads:]\nbring coffee")
	e.fake.WaitMessages(t, dm, 3)

	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageUpdate(first, "meet at 6")
	posted := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "whats the adress"})
	e.fake.SendMessageUpdate(posted, "what's the address?")

	e2 := start(t, setup{server: e.fake, dataDir: dir, agent: echo})
	if got, want := e2.receivedBy(2)[dm], []string{"[edited an earlier message; it now reads:]\nmeet at 6", "what's the address?"}; !slices.Equal(got, want) {
		t.Errorf("caught up as %q, want %q", got, want)
	}
	assertNoMore(t, e2)
	e.fake.WaitMessages(t, dm, 5)

	// Settled: a restart takes up neither edit again, nor the live one.
	e3 := restart(t, e2, dir, setup{agent: echo})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "see you"})
	e3.receivedIs("see you")
	assertNoMore(t, e3)
}
