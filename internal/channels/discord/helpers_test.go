package discord_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// instantClock is the real clock except that every timer fires at once, so
// reconnect backoff never slows a test down (the backoff itself is tested
// with clock.Fake).
type instantClock struct{}

func (instantClock) Now() time.Time { return time.Now() }
func (instantClock) NewTimer(time.Duration) clock.Timer {
	return firedTimer{ch: func() chan time.Time { c := make(chan time.Time, 1); c <- time.Now(); return c }()}
}

type firedTimer struct{ ch chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.ch }
func (t firedTimer) Stop() bool          { return false }

// setup configures an env; the zero value is a connected adapter with
// allow_from ["*"] and group_policy mention, without manager or agent.
type setup struct {
	fake discordfake.Options
	// before populates the fake before the adapter is configured, so cfg
	// can refer to the ids it created.
	before func(*discordfake.Server)
	cfg    func(*discord.Config)
	deps   func(*discord.Deps)
	// agent, when set, starts the channel manager and a stand-in agent
	// answering every inbound message with agent(m).
	agent func(bus.InboundMessage) reply
	// manager tweaks the manager's config (retry policy...).
	manager func(*channels.ManagerConfig)
	noWait  bool // do not wait for READY (for refused connections)
	quiet   bool // no logs (benchmarks print every log line)
	// server and dataDir, when set, reuse a fake and a data directory, to
	// start the adapter again as after a restart.
	server  *discordfake.Server
	dataDir string
}

// reply is what the stand-in agent does for one inbound message.
type reply struct {
	drafts []string // published as KindDraft before the final
	// gate, when set, holds the final back until the test closes it.
	gate  <-chan struct{}
	final string
	media []bus.OutboundMessage
}

// env is an adapter connected to a fake Discord, with its bus and, when
// asked, the real channel manager and a stand-in agent.
type env struct {
	t    testing.TB
	fake *discordfake.Server
	bus  *bus.Bus
	ch   *discord.Channel
	cfg  discord.Config
	// got receives what the stand-in agent was given.
	got  chan bus.InboundMessage
	done chan error // Run's result
	stop func() error
}

func start(t testing.TB, s setup) *env {
	t.Helper()
	fake := s.server
	if fake == nil {
		fake = discordfake.New(t, s.fake)
	}
	if s.before != nil {
		s.before(fake)
	}
	defaults := config.Defaults()
	cfg := *discord.Of(&defaults)
	cfg.Enabled, cfg.Token, cfg.APIURL = true, fake.Token(), fake.URL()
	cfg.AllowFrom, cfg.MaxMediaBytes = []string{"*"}, 1<<20
	// Output as before: no streaming or tool hints unless a test asks.
	cfg.Streaming, cfg.ToolHints, cfg.TypingDelay = false, false, 0
	if s.cfg != nil {
		s.cfg(&cfg)
	}
	b := bus.New(64)
	if s.dataDir == "" {
		s.dataDir = t.TempDir()
	}
	deps := discord.Deps{Bus: b, Workspace: t.TempDir(), DataDir: s.dataDir, Clock: instantClock{},
		Limits: channels.IntakeLimits(defaults.Agents, cfg.Access)}
	if s.deps != nil {
		s.deps(&deps)
	}
	log := zap.NewNop()
	if !s.quiet {
		log = zaptest.NewLogger(t)
	}
	ch, err := discord.New(cfg, deps, log.Named("discord"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &env{t: t, fake: fake, bus: b, ch: ch, cfg: cfg, got: make(chan bus.InboundMessage, 64), done: make(chan error, 1)}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { e.done <- ch.Run(ctx) }()
	var wg sync.WaitGroup
	if s.agent != nil {
		mcfg := channels.ManagerConfig{Retry: channels.RetryPolicy{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
		if s.manager != nil {
			s.manager(&mcfg)
		}
		m := channels.NewManager(b.Outbound(), mcfg, log.Named("manager"))
		if err := m.Register(ch, discord.NewRenderer(0), cfg.OutputConfig); err != nil {
			t.Fatalf("Register: %v", err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := m.Run(context.Background()); err != nil {
				t.Errorf("manager: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			standInAgent(b, e.got, s.agent)
		}()
	}
	var once sync.Once
	var runErr error
	e.stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-e.done
			// The agent stops on the closed inbound queue; the manager then
			// delivers what is queued and stops on the closed outbound one.
			b.CloseInbound()
			if s.agent == nil {
				b.CloseOutbound()
			}
			wg.Wait()
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil && !s.noWait {
			t.Errorf("Run: %v", err)
		}
	})
	if !s.noWait {
		fake.WaitReady(t, 1)
		e.waitHealthy()
	}
	return e
}

// waitHealthy polls until the adapter reports a live gateway: the fake
// knows when it sent READY, not when the adapter finished handling it.
func (e *env) waitHealthy() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.ch.Healthy() != nil {
		if time.Now().After(deadline) {
			e.t.Fatalf("adapter not healthy after 10s: %v", e.ch.Healthy())
		}
		time.Sleep(time.Millisecond)
	}
}

// standInAgent plays the agent's side of the bus contract: per inbound
// message, KindStart, the drafts, one KindFinal (replying to the message),
// then any extra messages, then the acknowledgement. It closes the outbound
// queue when inbound closes.
func standInAgent(b *bus.Bus, got chan<- bus.InboundMessage, answer func(bus.InboundMessage) reply) {
	defer b.CloseOutbound()
	ctx := context.Background()
	turn := 0
	for m := range b.Inbound() {
		got <- m
		r := answer(m)
		turn++
		out := bus.OutboundMessage{Channel: m.Channel, ChatID: m.ChatID, ReplyTo: m.MessageID,
			Metadata: m.Metadata, TurnID: m.ChatID + "/" + string(rune('a'+turn%26))}
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
			x.Channel, x.ChatID = m.Channel, m.ChatID
			_ = b.PublishOutbound(ctx, x)
		}
		if m.Ack != nil {
			m.Ack()
		}
	}
}

func echo(m bus.InboundMessage) reply { return reply{final: "echo: " + m.Content} }

// received waits for the next message the stand-in agent got.
func (e *env) received() bus.InboundMessage {
	e.t.Helper()
	select {
	case m := <-e.got:
		return m
	case <-time.After(10 * time.Second):
		e.t.Fatal("the agent got no message within 10s")
		return bus.InboundMessage{}
	}
}

// receivedIs waits for the agent's next message and checks its content.
// Messages of one chat are handled in order, so a message that should have
// been dropped before this one would show up here instead.
func (e *env) receivedIs(content string) bus.InboundMessage {
	e.t.Helper()
	m := e.received()
	if m.Content != content {
		e.t.Fatalf("agent got %q, want %q (did an earlier message get through?)", m.Content, content)
	}
	return m
}

// inbound waits for the next message on the bus (no agent running).
func (e *env) inbound() bus.InboundMessage {
	e.t.Helper()
	select {
	case m := <-e.bus.Inbound():
		return m
	case <-time.After(10 * time.Second):
		e.t.Fatal("no inbound message within 10s")
		return bus.InboundMessage{}
	}
}

func (e *env) inboundIs(content string) bus.InboundMessage {
	e.t.Helper()
	m := e.inbound()
	if m.Content != content {
		e.t.Fatalf("inbound content %q, want %q (did an earlier message get through?)", m.Content, content)
	}
	return m
}

// runEnds waits for Run to return on its own.
func (e *env) runEnds() error {
	e.t.Helper()
	select {
	case err := <-e.done:
		e.done <- err // for stop
		return err
	case <-time.After(10 * time.Second):
		e.t.Fatal("Run did not return within 10s")
		return nil
	}
}

// mention is how a Discord client writes a mention of the bot.
func (e *env) mention() string { return "<@" + e.fake.Bot().ID + ">" }

// guild creates a guild with a text channel and a member.
func (e *env) guild() (guildID, channelID string, member discordfake.User) {
	g := e.fake.AddGuild("g")
	ch := e.fake.AddTextChannel(g, "general")
	u := e.fake.NewUser("carol")
	e.fake.AddMember(g, u)
	return g, ch, u
}

// joined concatenates message contents, for checking nothing was lost.
func joined(ms []discordfake.Message) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "\n")
}

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
