package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/matrix"
	"github.com/nanobot-go/nanobot/internal/testkit/dendrite"
)

func TestRateLimitIsTheServers(t *testing.T) {
	t.Parallel()
	const cooloff = 300 * time.Millisecond
	w := newWorld(t, dendrite.Options{RateLimit: 3, Cooloff: cooloff})
	alice := w.person("alice")
	resp, err := alice.cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "trusted_private_chat",
		IsDirect: true, Invite: []id.UserID{id.UserID(w.bot.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.client(w.bot).JoinRoomByID(context.Background(), resp.RoomID); err != nil {
		t.Fatal(err)
	}
	cfg := matrix.Defaults()
	cfg.Enabled, cfg.Homeserver, cfg.UserID, cfg.AccessToken = true, w.srv.URL, w.bot.ID, w.bot.AccessToken
	cfg.AllowFrom = []string{"*"}
	ch, err := matrix.New(cfg, matrix.Deps{Bus: bus.New(1)}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	// Dendrite limits typing, receipts, joins and invites (Synapse limits
	// sends too); all go through the same classification.
	var rl *channels.RateLimitError
	for i := 0; i < 30 && rl == nil; i++ {
		err := ch.Typing(context.Background(), resp.RoomID.String(), nil)
		if err != nil && !errors.As(err, &rl) {
			t.Fatalf("typing %d: %v, want success or a rate limit", i, err)
		}
	}
	if rl == nil {
		t.Fatal("30 typing notifications in a row were never limited")
	}
	if rl.RetryAfter != cooloff || !strings.Contains(rl.Error(), "M_LIMIT_EXCEEDED") {
		t.Errorf("rate limit %v after %s, want the server's retry_after_ms %s", rl, rl.RetryAfter, cooloff)
	}
}

// Typing, read receipts and the start's whoami are limited here; the
// answer still streams into one message.
func TestStreamingUnderTheServersRateLimitEndsInTheAnswer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{RateLimit: 4, Cooloff: 100 * time.Millisecond})
	drafts := make([]string, 12)
	for i := range drafts {
		drafts[i] = "draft " + strings.Repeat("more ", i+1)
	}
	e := w.start(setup{
		cfg:   func(c *matrix.Config) { c.Streaming = true; c.EditInterval = time.Millisecond },
		agent: func(bus.InboundMessage) reply { return reply{drafts: drafts, final: "The **answer** is 42."} },
	})
	alice := w.person("alice")
	dm := alice.dm()
	alice.say(dm, "q")
	e.receivedIs("q")
	var msgs []botMessage
	waitFor(t, "the final answer", func() bool {
		msgs = alice.botMessages(dm)
		return len(msgs) > 0 && msgs[len(msgs)-1].Content.Body == "The **answer** is 42."
	})
	if len(msgs) != 1 {
		t.Errorf("%d messages, want the one draft edited into the answer", len(msgs))
	}
}

func TestVoiceTranscribedImagesAndFilesDescribed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	tr := &fakeTranscriber{text: "remind me to water the plants"}
	var workspace string
	e := w.start(setup{deps: func(d *matrix.Deps) { d.Transcriber = tr; workspace = d.Workspace }})
	alice := w.person("alice")
	dm := alice.dm()
	upload := func(data []byte, mime, name string) id.ContentURIString {
		up, err := alice.cli.UploadBytesWithName(context.Background(), data, mime, name)
		if err != nil {
			t.Fatal(err)
		}
		return up.ContentURI.CUString()
	}
	alice.send(dm, &event.MessageEventContent{MsgType: event.MsgAudio, Body: "Voice message", FileName: "voice.ogg",
		URL: upload([]byte("OggS voice"), "audio/ogg", "voice.ogg"), Info: &event.FileInfo{MimeType: "audio/ogg", Size: 10},
		MSC3245Voice: &event.MSC3245Voice{}})
	if in := e.received(); in.Content != "[voice message] remind me to water the plants" || len(in.Media) != 0 {
		t.Errorf("voice message arrived as %q with %d parts", in.Content, len(in.Media))
	}
	if tr.calls() != 1 {
		t.Errorf("transcriber called %d times", tr.calls())
	}

	alice.send(dm, &event.MessageEventContent{MsgType: event.MsgFile, Body: "report.pdf", FileName: "report.pdf",
		URL: upload([]byte("%PDF-1.4"), "application/pdf", "report.pdf"), Info: &event.FileInfo{MimeType: "application/pdf", Size: 8}})
	in := e.received()
	if len(in.Media) != 1 || in.Media[0].Kind != "file_ref" || !strings.HasPrefix(in.Media[0].File.Path, "inbox/") {
		t.Fatalf("file arrived as %q with %+v", in.Content, in.Media)
	}
	if _, err := filepath.Rel(workspace, filepath.Join(workspace, in.Media[0].File.Path)); err != nil {
		t.Error(err)
	}

	alice.send(dm, &event.MessageEventContent{MsgType: event.MsgLocation, Body: "Berlin", GeoURI: "geo:52.52,13.405"})
	e.receivedIs("[location: 52.52000, 13.40500]")
}

func TestTypingAndReadReceiptsReachThePerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	release := make(chan struct{})
	e := w.start(setup{agent: func(bus.InboundMessage) reply { return reply{gate: release, final: "done"} }})
	alice := w.person("alice")
	dm := alice.dm()
	asked := alice.say(dm, "take your time")
	e.receivedIs("take your time")
	bot := id.UserID(w.bot.ID)
	var typing, read bool
	since := ""
	deadline := time.Now().Add(20 * time.Second)
	for !(typing && read) && time.Now().Before(deadline) {
		resp, err := alice.cli.FullSyncRequest(context.Background(), mautrix.ReqSync{Since: since, Timeout: 1000})
		if err != nil {
			t.Fatal(err)
		}
		since = resp.NextBatch
		if jr := resp.Rooms.Join[dm]; jr != nil {
			for _, evt := range jr.Ephemeral.Events {
				switch evt.Type.Type {
				case event.EphemeralEventTyping.Type:
					var c event.TypingEventContent
					if json.Unmarshal(evt.Content.VeryRaw, &c) == nil && slices.Contains(c.UserIDs, bot) {
						typing = true
					}
				case event.EphemeralEventReceipt.Type:
					var c event.ReceiptEventContent
					if json.Unmarshal(evt.Content.VeryRaw, &c) == nil {
						if _, ok := c[asked][event.ReceiptTypeRead][bot]; ok {
							read = true
						}
					}
				}
			}
		}
	}
	close(release)
	if !typing || !read {
		t.Errorf("alice saw typing %v, read receipt %v; want both", typing, read)
	}
	alice.waitBot(dm, 1)
}

func TestEncryptedRoomToldOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	e := w.start(setup{})
	alice := w.person("alice")
	resp, err := alice.cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{
		Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{id.UserID(w.bot.ID)},
		InitialState: []*event.Event{{Type: event.StateEncryption, StateKey: ptr(""),
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	alice.waitJoined(room, id.UserID(w.bot.ID))
	for range 2 {
		_, err := alice.cli.SendMessageEvent(context.Background(), room, event.EventEncrypted, map[string]any{
			"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnAC…", "sender_key": "k", "session_id": "s", "device_id": "D"})
		if err != nil {
			t.Fatal(err)
		}
	}
	alice.say(room, "marker")
	e.receivedIs("marker")
	msgs := alice.waitBot(room, 2)
	var notices int
	for _, m := range msgs {
		if strings.Contains(m.Content.Body, "encrypted") {
			notices++
		}
	}
	if notices != 1 || len(msgs) != 2 {
		t.Errorf("bot said %d things, %d about encryption; want the notice once, then the echo", len(msgs), notices)
	}
}

func TestPairingByDirectInvite(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	store := channels.NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	e := w.start(setup{
		cfg:  func(c *matrix.Config) { c.Policy = "pairing"; c.AllowFrom = nil },
		deps: func(d *matrix.Deps) { d.Pairing = store },
	})
	bob := w.person("bob")
	dm := bob.dm() // a stranger's direct invite is joined under pairing
	bob.say(dm, "/whoami")
	if got := bob.waitBot(dm, 1)[0].Content.Body; strings.Count(got, bob.id.String()) != 1 {
		t.Errorf("/whoami answered %q, want the user id once", got)
	}
	bob.say(dm, "hello?")
	code := bob.waitBot(dm, 2)[1].Content.Body
	st, err := store.List()
	if err != nil || len(st.Pending) != 1 || !strings.Contains(code, st.Pending[0].Code) {
		t.Fatalf("pairing reply %q, store %+v (%v)", code, st, err)
	}
	if _, err := store.Approve(st.Pending[0].Code); err != nil {
		t.Fatal(err)
	}
	bob.say(dm, "now?")
	e.receivedIs("now?")
}

func ptr[T any](v T) *T { return &v }

// fakeTranscriber stands in for the OpenAI-compatible transcription client.
type fakeTranscriber struct {
	text string
	mu   sync.Mutex
	n    int
}

func (f *fakeTranscriber) Transcribe(_ context.Context, _, mime string, audio []byte) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if mime != "audio/ogg" || len(audio) == 0 {
		return "", errors.New("unexpected audio")
	}
	return f.text, nil
}

func (f *fakeTranscriber) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func TestPasswordLoginKeepsItsToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dendrite.Options{})
	data := t.TempDir()
	byPassword := func(c *matrix.Config) { c.AccessToken, c.Password, c.DeviceID = "", "bot-password-1", "NANOBOTDEV" }
	e := w.start(setup{dataDir: data, cfg: byPassword})
	alice := w.person("alice")
	dm := alice.dm()
	alice.say(dm, "one")
	e.receivedIs("one")
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, matrix.LoginFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("login file: %v, %v", fi, err)
	}
	var kept struct {
		DeviceID    string `json:"device_id"`
		AccessToken string `json:"access_token"`
	}
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &kept) != nil || kept.DeviceID != "NANOBOTDEV" || kept.AccessToken == "" {
		t.Fatalf("login file holds %+v (%v)", kept, err)
	}

	// The second start reuses the token: still one device of the bot's.
	e = w.start(setup{dataDir: data, cfg: byPassword})
	alice.say(dm, "two")
	e.receivedIs("two")
	devices, err := w.client(w.bot).GetDevicesInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range devices.Devices {
		ids = append(ids, d.DeviceID.String())
	}
	if want := []string{w.bot.DeviceID, "NANOBOTDEV"}; len(ids) != 2 || !slices.Contains(ids, want[0]) || !slices.Contains(ids, want[1]) {
		t.Errorf("the bot's devices %v, want the registration's and the one login's %v", ids, want)
	}
}
