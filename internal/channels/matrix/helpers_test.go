package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/matrix"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/dendrite"
)

// The tests drive the adapter against a real Dendrite (internal/testkit/
// dendrite): people are real accounts with their own mautrix clients, the
// bot's replies are read back from the room over the client-server API,
// and a stand-in agent answers on the bus, the real channel manager
// delivering its answers (as the Discord and Telegram end-to-end tests do
// against their fakes).

// instantClock is the real clock except that every timer fires at once,
// so retry backoff never slows a test down.
type instantClock struct{}

func (instantClock) Now() time.Time { return time.Now() }
func (instantClock) NewTimer(time.Duration) clock.Timer {
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return firedTimer{ch: ch}
}

type firedTimer struct{ ch chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.ch }
func (t firedTimer) Stop() bool          { return false }

// world is one homeserver with the bot's account on it.
type world struct {
	t   *testing.T
	srv *dendrite.Server
	bot dendrite.User
	n   atomic.Int32
}

func newWorld(t *testing.T, opts dendrite.Options) *world {
	t.Helper()
	srv := dendrite.Start(t, opts)
	w := &world{t: t, srv: srv, bot: srv.Register("nanobot", "bot-password-1")}
	// A display name people can address the bot by.
	if err := w.client(w.bot).SetDisplayName(context.Background(), "NanoBot"); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) client(u dendrite.User) *mautrix.Client {
	w.t.Helper()
	cli, err := mautrix.NewClient(w.srv.URL, id.UserID(u.ID), u.AccessToken)
	if err != nil {
		w.t.Fatal(err)
	}
	cli.DeviceID = id.DeviceID(u.DeviceID)
	return cli
}

// person registers a user with a client of their own.
func (w *world) person(name string) *person {
	w.t.Helper()
	u := w.srv.Register(name, name+"-password-1")
	p := &person{t: w.t, w: w, user: u, cli: w.client(u), id: id.UserID(u.ID)}
	if err := p.cli.SetDisplayName(context.Background(), strings.ToUpper(name[:1])+name[1:]); err != nil {
		w.t.Fatal(err)
	}
	return p
}

type person struct {
	t    *testing.T
	w    *world
	user dendrite.User
	cli  *mautrix.Client
	id   id.UserID
}

// setup configures an env; the zero value is the bot with allow_from
// ["*"], group_policy mention, streaming off, and a stand-in echo agent.
type setup struct {
	cfg  func(*matrix.Config)
	deps func(*matrix.Deps)
	// agent answers each inbound message; nil: echo.
	agent   func(bus.InboundMessage) reply
	dataDir string
	// timeline, when set, is the sync's events per room (a gap is made
	// with more than that).
	timeline int
}

type reply struct {
	drafts []string
	gate   <-chan struct{}
	final  string
	media  []bus.OutboundMessage
}

func echo(m bus.InboundMessage) reply { return reply{final: "echo: " + m.Content} }

// env is the adapter running against the world's homeserver, with its bus,
// the channel manager and a stand-in agent.
type env struct {
	t    *testing.T
	w    *world
	ch   *matrix.Channel
	got  chan bus.InboundMessage
	stop func() error
}

func (w *world) start(s setup) *env {
	t := w.t
	t.Helper()
	cfg := matrix.Defaults()
	cfg.Enabled, cfg.Homeserver, cfg.UserID, cfg.AccessToken = true, w.srv.URL, w.bot.ID, w.bot.AccessToken
	cfg.AllowFrom = []string{"*"}
	cfg.Streaming, cfg.ToolHints, cfg.TypingDelay = false, false, 0
	if s.cfg != nil {
		s.cfg(&cfg)
	}
	if s.dataDir == "" {
		s.dataDir = t.TempDir()
	}
	b := bus.New(64)
	deps := matrix.Deps{Bus: b, Workspace: t.TempDir(), DataDir: s.dataDir, Clock: instantClock{},
		Limits: channels.IntakeLimits(config.Defaults().Agents, cfg.Access)}
	if s.deps != nil {
		s.deps(&deps)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	ch, err := matrix.New(cfg, deps, log.Named("matrix"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.timeline > 0 {
		matrix.SetTimelineLimit(ch, s.timeline)
	}
	e := &env{t: t, w: w, ch: ch, got: make(chan bus.InboundMessage, 64)}
	agent := s.agent
	if agent == nil {
		agent = echo
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx) }()
	m := channels.NewManager(b.Outbound(), channels.ManagerConfig{
		Retry: channels.RetryPolicy{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}, log.Named("manager"))
	if err := m.Register(ch, matrix.NewRenderer(), cfg.OutputConfig); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := m.Run(context.Background()); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	go func() { defer wg.Done(); standInAgent(b, e.got, agent) }()
	var once sync.Once
	var runErr error
	e.stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			b.CloseInbound()
			wg.Wait()
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	e.waitHealthy()
	return e
}

func (e *env) waitHealthy() {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.ch.Healthy() != nil {
		if time.Now().After(deadline) {
			e.t.Fatalf("adapter not healthy after 20s: %v", e.ch.Healthy())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// standInAgent plays the agent's side of the bus: per inbound message
// KindStart, the drafts, one KindFinal replying to it, then any extra
// messages, then the acknowledgement.
func standInAgent(b *bus.Bus, got chan<- bus.InboundMessage, answer func(bus.InboundMessage) reply) {
	defer b.CloseOutbound()
	ctx := context.Background()
	turn := 0
	for m := range b.Inbound() {
		got <- m
		r := answer(m)
		turn++
		out := bus.OutboundMessage{Channel: m.Channel, ChatID: m.ChatID, ReplyTo: m.MessageID,
			Metadata: m.Metadata, TurnID: fmt.Sprintf("%s/%d", m.ChatID, turn)}
		pub := func(k bus.Kind, content string) {
			o := out
			o.Kind, o.Content = k, content
			_ = b.PublishOutbound(ctx, o)
		}
		pub(bus.KindStart, "")
		for _, d := range r.drafts {
			pub(bus.KindDraft, d)
		}
		if r.gate != nil {
			<-r.gate
		}
		pub(bus.KindFinal, r.final)
		for _, x := range r.media {
			x.Channel, x.ChatID, x.Metadata = m.Channel, m.ChatID, m.Metadata
			_ = b.PublishOutbound(ctx, x)
		}
		if m.Ack != nil {
			m.Ack()
		}
	}
}

// receiveWait outlasts one long poll (matrix's syncTimeout, 30 s): if the
// homeserver does not wake a pending sync for a new event, the poll's end
// still brings it. Once under load a message sent right after the bot
// joined arrived later than 20 s with no error logged; the cause is
// suspected, not proven.
const receiveWait = 45 * time.Second

// received waits for the next message the stand-in agent got.
func (e *env) received() bus.InboundMessage {
	e.t.Helper()
	select {
	case m := <-e.got:
		return m
	case <-time.After(receiveWait):
		e.t.Fatalf("the agent got no message within %s", receiveWait)
		return bus.InboundMessage{}
	}
}

// receivedIs waits for the agent's next message and checks its content;
// a message that should have been dropped before it would show up here.
func (e *env) receivedIs(content string) bus.InboundMessage {
	e.t.Helper()
	m := e.received()
	if m.Content != content {
		e.t.Fatalf("agent got %q, want %q (did an earlier message get through?)", m.Content, content)
	}
	return m
}

// dm opens a direct chat with the bot and waits until it joined.
func (p *person) dm() id.RoomID {
	p.t.Helper()
	resp, err := p.cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{
		Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{id.UserID(p.w.bot.ID)}})
	if err != nil {
		p.t.Fatal(err)
	}
	p.waitJoined(resp.RoomID, id.UserID(p.w.bot.ID))
	return resp.RoomID
}

// room opens a group room with the bot and others, who join it.
func (p *person) room(others ...*person) id.RoomID {
	p.t.Helper()
	invite := []id.UserID{id.UserID(p.w.bot.ID)}
	for _, o := range others {
		invite = append(invite, o.id)
	}
	resp, err := p.cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "group", Invite: invite})
	if err != nil {
		p.t.Fatal(err)
	}
	for _, o := range others {
		if _, err := o.cli.JoinRoomByID(context.Background(), resp.RoomID); err != nil {
			p.t.Fatal(err)
		}
	}
	p.waitJoined(resp.RoomID, id.UserID(p.w.bot.ID))
	return resp.RoomID
}

func (p *person) waitJoined(room id.RoomID, who id.UserID) {
	p.t.Helper()
	waitFor(p.t, string(who)+" joined "+string(room), func() bool {
		m, err := p.cli.JoinedMembers(context.Background(), room)
		if err != nil {
			return false
		}
		_, ok := m.Joined[who]
		return ok
	})
}

// say sends a plain text message and returns its event id.
func (p *person) say(room id.RoomID, text string) id.EventID {
	p.t.Helper()
	return p.send(room, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

func (p *person) send(room id.RoomID, content *event.MessageEventContent) id.EventID {
	p.t.Helper()
	resp, err := p.cli.SendMessageEvent(context.Background(), room, event.EventMessage, content)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.EventID
}

// timeline is the room's message events, oldest first.
func (p *person) timeline(room id.RoomID) []*event.Event {
	p.t.Helper()
	resp, err := p.cli.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 500)
	if err != nil {
		p.t.Fatal(err)
	}
	var out []*event.Event
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		evt := resp.Chunk[i]
		if evt.Type.Type != event.EventMessage.Type {
			continue
		}
		evt.Type.Class = event.MessageEventType
		if err := evt.Content.ParseRaw(event.EventMessage); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
			continue
		}
		out = append(out, evt)
	}
	return out
}

// botMessages are the bot's messages in the room, edits folded in: each
// as its latest content, oldest first.
func (p *person) botMessages(room id.RoomID) []botMessage {
	p.t.Helper()
	var out []botMessage
	index := map[id.EventID]int{}
	for _, evt := range p.timeline(room) {
		if evt.Sender != id.UserID(p.w.bot.ID) {
			continue
		}
		c := evt.Content.AsMessage()
		if orig := c.RelatesTo.GetReplaceID(); orig != "" && c.NewContent != nil {
			if i, ok := index[orig]; ok {
				out[i].Content = c.NewContent
				out[i].Edits++
			}
			continue
		}
		index[evt.ID] = len(out)
		out = append(out, botMessage{ID: evt.ID, Content: c, First: c})
	}
	return out
}

type botMessage struct {
	ID      id.EventID
	First   *event.MessageEventContent // as first sent
	Content *event.MessageEventContent // latest version
	Edits   int
}

// waitBot waits until the bot has at least n messages in the room.
func (p *person) waitBot(room id.RoomID, n int) []botMessage {
	p.t.Helper()
	var got []botMessage
	waitFor(p.t, fmt.Sprintf("%d bot messages in %s", n, room), func() bool {
		got = p.botMessages(room)
		return len(got) >= n
	})
	return got
}

// waitFor polls cond until it holds, failing after 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mention is how Element writes a mention pill of the bot.
func (p *person) mention(room id.RoomID, text string) id.EventID {
	p.t.Helper()
	bot := p.w.bot.ID
	return p.send(room, &event.MessageEventContent{MsgType: event.MsgText,
		Body:          "NanoBot: " + text,
		Format:        event.FormatHTML,
		FormattedBody: `<a href="https://matrix.to/#/` + bot + `">NanoBot</a>: ` + text,
		Mentions:      &event.Mentions{UserIDs: []id.UserID{id.UserID(bot)}}})
}
