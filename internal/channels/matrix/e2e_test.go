package matrix_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels/matrix"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/dendrite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDMAnsweredAsMarkdownReplyAndEditsReadAsCorrections(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	e := w.start(setup{agent: func(m bus.InboundMessage) reply { return reply{final: "**echo**: " + m.Content} }})
	alice := w.person("alice")
	dm := alice.dm()

	asked := alice.say(dm, "hello there")
	in := e.receivedIs("hello there")
	if in.ChatID != dm.String() || in.SenderID != alice.id.String() || in.MessageID != asked.String() ||
		in.Key() != "matrix:"+dm.String() || in.Metadata["is_group"] != "false" || in.SenderName != "Alice ("+alice.id.String()+")" {
		t.Errorf("agent got %+v", in)
	}
	got := alice.waitBot(dm, 1)[0].Content
	if got.Body != "echo: hello there" && got.Body != "**echo**: hello there" {
		t.Errorf("body %q", got.Body)
	}
	if got.Format != event.FormatHTML || !strings.Contains(got.FormattedBody, "<strong>echo</strong>") {
		t.Errorf("formatted_body %q (%s), want the Markdown as HTML", got.FormattedBody, got.Format)
	}
	if got.RelatesTo.GetReplyTo() != asked {
		t.Errorf("reply relates to %+v, want an answer to %s", got.RelatesTo, asked)
	}
	if got.Mentions == nil || len(got.Mentions.UserIDs) != 0 || got.Mentions.Room {
		t.Errorf("m.mentions %+v: the model's text must ping nobody", got.Mentions)
	}

	// An edit reads as a correction of the message it edits.
	fix := &event.MessageEventContent{MsgType: event.MsgText, Body: "hello world"}
	fix.SetEdit(asked)
	alice.send(dm, fix)
	in = e.receivedIs("[edited an earlier message; it now reads:]\nhello world")
	if !strings.HasPrefix(in.MessageID, asked.String()) || in.MessageID == asked.String() {
		t.Errorf("edit's message id %q, want the edited message's with the version", in.MessageID)
	}

	// A reply carries what it answers.
	mine := alice.waitBot(dm, 2)[0].ID
	r := &event.MessageEventContent{MsgType: event.MsgText, Body: "and more?"}
	r.RelatesTo = (&event.RelatesTo{}).SetReplyTo(mine)
	alice.send(dm, r)
	e.receivedIs("[in reply to your earlier message: \"**echo**: hello there\"]\nand more?")
}

func TestRoomMentionGating(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	e := w.start(setup{})
	alice, carol := w.person("alice"), w.person("carol")
	room := alice.room(carol)

	carol.say(room, "just chatting among ourselves")
	carol.mention(room, "what time is it?")
	in := e.receivedIs("what time is it?")
	if in.Metadata["is_group"] != "true" || in.Key() != "matrix:"+room.String() || in.Group != "matrix:"+room.String() {
		t.Errorf("room message = %+v", in)
	}
	answer := carol.waitBot(room, 1)[0]

	// A reply to the bot addresses it without a mention.
	r := &event.MessageEventContent{MsgType: event.MsgText, Body: "and tomorrow?"}
	r.RelatesTo = (&event.RelatesTo{}).SetReplyTo(answer.ID)
	carol.send(room, r)
	e.receivedIs("[in reply to your earlier message: \"echo: what time is it?\"]\nand tomorrow?")

	// The display name typed as a word, and the user id, address it too.
	carol.say(room, "nanobot, ping")
	e.receivedIs("ping")
	carol.say(room, "ask "+w.bot.ID+" about it")
	e.receivedIs("ask  about it")

	// Someone else's name is not the bot's.
	carol.say(room, "alice, are you there?")
	carol.mention(room, "marker")
	e.receivedIs("marker")
}

func TestThreadKeepsItsPlace(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	e := w.start(setup{})
	alice, carol := w.person("alice"), w.person("carol")
	room := alice.room(carol)

	root := alice.say(room, "a topic to discuss")
	in := &event.MessageEventContent{MsgType: event.MsgText, Body: "NanoBot: in the thread",
		Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(w.bot.ID)}}}
	in.RelatesTo = (&event.RelatesTo{}).SetThread(root, root)
	asked := alice.send(room, in)

	got := e.receivedIs("in the thread")
	if got.Key() != "matrix:"+room.String()+":thread:"+root.String() || got.Metadata["thread_id"] != root.String() {
		t.Errorf("thread message = %+v (key %s)", got, got.Key())
	}
	if c, ok := matrix.Target(got.Key()); !ok || c.ID != room.String() || c.Metadata["thread_id"] != root.String() {
		t.Errorf("Target(%q) = %+v, %v", got.Key(), c, ok)
	}
	rep := alice.waitBot(room, 1)[0].Content
	if rep.RelatesTo.GetThreadParent() != root || rep.RelatesTo.GetReplyTo() != asked {
		t.Errorf("reply relates to %+v, want the thread %s, answering %s", rep.RelatesTo, root, asked)
	}

	// An edit of a message in the thread is a correction in the thread.
	fix := &event.MessageEventContent{MsgType: event.MsgText, Body: "NanoBot: in the thread, corrected",
		Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(w.bot.ID)}}}
	fix.SetEdit(asked)
	alice.send(room, fix)
	got = e.receivedIs("[edited an earlier message; it now reads:]\nin the thread, corrected")
	if got.Key() != "matrix:"+room.String()+":thread:"+root.String() {
		t.Errorf("edit filed under %s, want the thread's session", got.Key())
	}
}

func TestEditStreamedLongReply(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	var long strings.Builder
	long.WriteString("Here is the plan.\n\n")
	for i := 0; long.Len() < matrix.MaxMessageBytes+4000; i++ {
		long.WriteString("A paragraph with words that keep going for a while, number ")
		long.WriteString(strings.Repeat("x", i%7))
		long.WriteString(".\n\n")
	}
	long.WriteString("Done.")
	shown := make(chan struct{})
	e := w.start(setup{
		cfg: func(c *matrix.Config) { c.Streaming = true; c.EditInterval = time.Millisecond },
		agent: func(bus.InboundMessage) reply {
			return reply{drafts: []string{"Thinking", "Thinking about the plan"}, gate: shown, final: long.String()}
		},
	})
	alice := w.person("alice")
	dm := alice.dm()
	alice.say(dm, "plan please")
	e.receivedIs("plan please")
	alice.waitBot(dm, 1)
	close(shown)
	var msgs []botMessage
	waitFor(t, "the whole answer", func() bool {
		msgs = alice.botMessages(dm)
		return len(msgs) > 0 && strings.HasSuffix(msgs[len(msgs)-1].Content.Body, "Done.")
	})
	if len(msgs) != 2 {
		t.Fatalf("%d messages for a %d-byte answer, want 2 (the draft edited into the first part, then the rest)", len(msgs), long.Len())
	}
	if !strings.HasPrefix(msgs[0].First.Body, "Thinking") || msgs[0].Edits < 1 {
		t.Errorf("first message %q with %d edits: want the draft, edited", msgs[0].First.Body, msgs[0].Edits)
	}
	var joined []string
	for _, m := range msgs {
		if len(m.Content.Body) > matrix.MaxMessageBytes+200 {
			t.Errorf("message of %d bytes", len(m.Content.Body))
		}
		joined = append(joined, m.Content.Body)
	}
	if got, want := strings.Join(strings.Fields(strings.Join(joined, " ")), " "), strings.Join(strings.Fields(long.String()), " "); got != want {
		t.Errorf("text lost or changed in streaming and splitting")
	}
}

func TestImageInFileOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	var workspace string
	e := w.start(setup{
		deps: func(d *matrix.Deps) { workspace = d.Workspace },
		agent: func(m bus.InboundMessage) reply {
			if m.Content != "send me the notes" {
				return reply{final: "ok"}
			}
			return reply{final: "here", media: []bus.OutboundMessage{{Kind: bus.KindMessage,
				Media: []llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "notes.md"}}}}}}
		},
	})
	if err := os.WriteFile(filepath.Join(workspace, "notes.md"), []byte("# notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := w.person("alice")
	dm := alice.dm()
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	up, err := alice.cli.UploadBytesWithName(context.Background(), png, "image/png", "cat.png")
	if err != nil {
		t.Fatal(err)
	}
	alice.send(dm, &event.MessageEventContent{MsgType: event.MsgImage, Body: "look at this", FileName: "cat.png",
		URL: up.ContentURI.CUString(), Info: &event.FileInfo{MimeType: "image/png", Size: len(png)}})
	in := e.received()
	if in.Content != "look at this" || len(in.Media) != 1 || in.Media[0].Kind != llm.PartImage ||
		string(in.Media[0].Image.Data) != string(png) || in.Media[0].Image.MIME != "image/png" {
		t.Fatalf("agent got %q with media %+v", in.Content, in.Media)
	}

	alice.say(dm, "send me the notes")
	e.receivedIs("send me the notes")
	var file *event.MessageEventContent
	waitFor(t, "the file", func() bool {
		for _, m := range alice.botMessages(dm) {
			if m.Content.MsgType == event.MsgFile {
				file = m.Content
				return true
			}
		}
		return false
	})
	mxc, err := file.URL.Parse()
	if err != nil {
		t.Fatal(err)
	}
	data, err := alice.cli.DownloadBytes(context.Background(), mxc)
	if err != nil || string(data) != "# notes" || file.Body != "notes.md" {
		t.Errorf("file %q: %q, %v", file.Body, data, err)
	}
}

func TestRestartNeitherLosesNorRepeats(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	data := t.TempDir()
	// Two events per room and sync: the five sent while the bot is down
	// come as a limited timeline, the rest fetched with /messages.
	s := setup{dataDir: data, timeline: 2}
	e := w.start(s)
	alice := w.person("alice")
	dm := alice.dm()
	alice.say(dm, "one")
	e.receivedIs("one")
	alice.waitBot(dm, 1)
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	// Sent while the bot is down: answered after the restart, once each,
	// in order; "one" is not answered again.
	missed := []string{"two", "three", "four", "five", "six"}
	for _, m := range missed {
		alice.say(dm, m)
	}
	e = w.start(s)
	for _, m := range missed {
		e.receivedIs(m)
	}
	alice.waitBot(dm, 6)
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	e = w.start(s)
	alice.say(dm, "seven")
	e.receivedIs("seven")
	msgs := alice.waitBot(dm, 7)
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, m.Content.Body)
	}
	if want := "echo: one|echo: two|echo: three|echo: four|echo: five|echo: six|echo: seven"; strings.Join(bodies, "|") != want {
		t.Errorf("replies %q, want each once: %s", bodies, want)
	}
	if fi, err := os.Stat(filepath.Join(data, matrix.StateFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, %v", fi, err)
	}
}

func TestStrangerRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	alice, mallory := w.person("alice"), w.person("mallory")
	e := w.start(setup{cfg: func(c *matrix.Config) { c.AllowFrom = []string{alice.id.String()} }})

	// Mallory's invite is declined.
	resp, err := mallory.cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{
		Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{id.UserID(w.bot.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the invite declined", func() bool {
		var m event.MemberEventContent
		err := mallory.cli.StateEvent(context.Background(), resp.RoomID, event.StateMember, w.bot.ID, &m)
		return err == nil && m.Membership == event.MembershipLeave
	})

	// In a room the bot is in, her mention reaches nobody.
	room := alice.room(mallory)
	mallory.mention(room, "let me in")
	alice.mention(room, "marker")
	e.receivedIs("marker")
	alice.waitBot(room, 1)
	for _, m := range alice.botMessages(room) {
		if strings.Contains(m.Content.Body, "let me in") {
			t.Errorf("the bot answered the stranger: %q", m.Content.Body)
		}
	}
}

// A crash in the middle of a turn: the message was handed to the agent and
// the sync position moved past it, but no answer was delivered (no Ack).
// What was on disk at that moment (copied while the turn hangs, as a
// SIGKILL would leave it) makes the next start hand the message over
// again, ahead of what was sent meanwhile, and marked as followed by it
// (one backlog); once answered it is not handed over a third time.
func TestCrashMidTurnHandsTheMessageOverAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	data := t.TempDir()
	hang := make(chan struct{})
	e := w.start(setup{dataDir: data, agent: func(m bus.InboundMessage) reply {
		if m.Content == "first" {
			return reply{gate: hang, final: "late"}
		}
		return echo(m)
	}})
	var once sync.Once
	release := func() { once.Do(func() { close(hang) }) }
	t.Cleanup(release) // before the env's own cleanup, which waits for the turn
	alice := w.person("alice")
	dm := alice.dm()
	alice.say(dm, "first")
	e.receivedIs("first")
	path := filepath.Join(data, matrix.StateFile)
	var crashed []byte
	waitFor(t, "the position saved with the message unanswered", func() bool {
		b, err := os.ReadFile(path)
		crashed = b
		return err == nil && strings.Contains(string(b), `"unanswered"`)
	})
	release()
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	alice.say(dm, "while down")
	after := t.TempDir()
	if err := os.WriteFile(filepath.Join(after, matrix.StateFile), crashed, 0o600); err != nil {
		t.Fatal(err)
	}
	s := setup{dataDir: after}
	e = w.start(s)
	if m := e.receivedIs("first"); !m.More {
		t.Error("the message handed over again is not marked as followed by more of the room's")
	}
	e.receivedIs("while down")
	alice.waitBot(dm, 3) // late (the crashed run's), echo: first, echo: while down
	waitFor(t, "the answers recorded", func() bool {
		b, err := os.ReadFile(filepath.Join(after, matrix.StateFile))
		return err == nil && !strings.Contains(string(b), `"unanswered"`)
	})
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	e = w.start(s)
	alice.say(dm, "third")
	e.receivedIs("third")
}
