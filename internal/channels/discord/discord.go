// Package discord is the Discord channel (docs/discord.md): it keeps a gateway
// session (intents guilds, guild messages, direct messages, message content)
// alive across disconnects, RECONNECT and INVALID_SESSION, turns the messages
// it may answer into bus.InboundMessages, fetches over REST what it missed
// while away (cursors.go, catchup.go), and sends, edits, deletes and types
// over the REST API for the channel-neutral manager in package channels.
//
// It is built on github.com/bwmarrin/discordgo with these deliberate
// departures from the library's defaults: REST goes through our own
// transport (api_url redirect, bounded context-aware rate limiting, unknown
// outcomes), reconnection is ours (discordgo's loop cannot be cancelled),
// events are handled synchronously on the gateway reader and queued to one
// owned goroutine (so a chat's messages stay in order and shutdown can wait
// for them), and the library's own logging is off (we log with zap).
package discord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Name is the channel's name on the bus.
const Name = "discord"

// Intents the bot identifies with. Message content is privileged: it must be
// switched on in the developer portal, or the gateway closes with 4014.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// Transcriber turns a voice message into text (an OpenAI-compatible
// /audio/transcriptions endpoint).
type Transcriber interface {
	Transcribe(ctx context.Context, filename, mime string, audio []byte) (string, error)
}

// Deps are the channel's collaborators.
type Deps struct {
	// Bus receives inbound messages, and the short replies the intake gives
	// itself (/whoami, pairing codes). Required.
	Bus channels.Publisher
	// Pairing is the shared pairing store; required with policy pairing.
	Pairing channels.Pairing
	// Workspace is the agent's workspace root; received files are saved
	// under <workspace>/inbox/ and outbound file_ref paths are resolved in
	// it. Without it files are described to the agent, not saved.
	Workspace string
	// Transcription is the OpenAI-compatible endpoint voice messages are
	// transcribed with; an empty BaseURL turns transcription off.
	Transcription config.TranscriptionConfig
	// Meter counts and admits transcriptions (the usage ledger and
	// budget); nil counts nothing.
	Meter channels.Meter
	// Transcriber replaces the client built from Transcription (tests).
	Transcriber Transcriber
	// HTTPTransport is the base transport for REST and downloads
	// (default: a clone of http.DefaultTransport, proxy from the environment).
	HTTPTransport http.RoundTripper
	// Clock drives reconnect backoff and rate-limit bookkeeping
	// (default: the system clock).
	Clock clock.Clock
	// Limits bound what senders can push (length, rate, dedupe); Channel
	// and Clock are filled in by the adapter.
	Limits channels.IntakeConfig
	// DataDir holds the chats' cursors (CursorFile), with which messages
	// posted while the bot was away are fetched and answered. Empty, or
	// catch_up 0, turns that off.
	DataDir string
	// Cursors, when set, keeps the cursors instead of DataDir (a KV bucket
	// when the channels process is scaled out, docs/scale-out.md).
	Cursors CursorStore
}

// Channel is the Discord adapter. Create it with New, then Run it; Send,
// Edit, Delete and Typing may be called concurrently at any time.
type Channel struct {
	cfg   Config
	deps  Deps
	log   *zap.Logger
	sess  *discordgo.Session
	http  *http.Client // attachment downloads
	dial  *gatewayDialer
	token string // without the "Bot " prefix

	intake *channels.Intake
	access *channels.Access

	// lanes run inbound messages in order per chat, chats in parallel;
	// the gateway reader hands them over under runCtx. Both are set by Run.
	lanes        atomic.Pointer[channels.Lanes]
	runCtx       atomic.Pointer[context.Context]
	running      atomic.Bool
	disconnected chan struct{} // signalled (non-blocking) on every Disconnect

	state  guildState
	dms    dmCache
	health health

	// cursors (nil when catch-up is off) and catchUpDue, signalled by each
	// new gateway session (see cursors.go and catchup.go).
	cursors    *cursors
	catchUpDue chan struct{}
}

var (
	_ channels.Channel = (*Channel)(nil)
	_ channels.Editor  = (*Channel)(nil)
	_ channels.Deleter = (*Channel)(nil)
	_ channels.Typer   = (*Channel)(nil)
)

// New builds the channel from its config, which must come from config.Load
// (or config.Defaults) and pass Validate: New defaults none of its values.
// It does no I/O.
func New(cfg Config, deps Deps, log *zap.Logger) (*Channel, error) {
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot "))
	if token == "" {
		return nil, errors.New("discord: token is empty")
	}
	if deps.Bus == nil {
		return nil, errors.New("discord: no bus")
	}
	if deps.Clock == nil {
		deps.Clock = clock.System{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	if deps.Transcriber == nil {
		if tr := channels.NewTranscriber(deps.Transcription, nil, deps.Meter); tr != nil {
			deps.Transcriber = tr
		}
	}
	access, err := channels.NewAccess(Name, cfg.Access, deps.Pairing)
	if err != nil {
		return nil, err
	}
	base := deps.HTTPTransport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr, err := newTransport(base, cfg.APIURL, deps.Clock.Now)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	sess, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord: session: %w", err)
	}
	c := &Channel{
		cfg:          cfg,
		deps:         deps,
		log:          log,
		sess:         sess,
		http:         &http.Client{Transport: base, Timeout: 2 * time.Minute},
		dial:         &gatewayDialer{},
		token:        token,
		disconnected: make(chan struct{}, 1),
		catchUpDue:   make(chan struct{}, 1),
	}
	if store := deps.Cursors; cfg.CatchUp > 0 && (store != nil || deps.DataDir != "") {
		if store == nil {
			store = FileCursorStore{Path: filepath.Join(deps.DataDir, CursorFile)}
		}
		c.cursors = newCursors(store, deps.Clock.Now, log)
	}
	deps.Limits.Channel, deps.Limits.Clock = Name, deps.Clock
	c.intake, c.access = channels.NewIntake(deps.Limits, access, deps.Bus, log), access
	c.state.init()
	c.health.set(errors.New("discord: not connected yet"))

	sess.Identify.Token = token // the gateway wants the bare token
	sess.Identify.Intents = Intents
	sess.Identify.Compress = false
	sess.Compress = false
	sess.StateEnabled = false // we keep the little state we need
	sess.SyncEvents = true    // handlers run on the reader: ordered, no stray goroutines
	sess.ShouldReconnectOnError = false
	sess.ShouldRetryOnRateLimit = false
	sess.MaxRestRetries = 0 // the manager retries, knowing what is safe to repeat
	sess.LogLevel = -1      // discordgo logs through the global log package
	sess.Client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	sess.Dialer = &websocket.Dialer{
		NetDialContext:   c.dial.dialContext,
		HandshakeTimeout: 15 * time.Second,
		Proxy:            http.ProxyFromEnvironment,
	}
	sess.AddHandler(c.onConnect)
	sess.AddHandler(c.onReady)
	sess.AddHandler(c.onResumed)
	sess.AddHandler(c.onDisconnect)
	sess.AddHandler(c.onMessageCreate)
	sess.AddHandler(c.onMessageUpdate)
	sess.AddHandler(c.onInteractionCreate)
	sess.AddHandler(c.onGuildCreate)
	sess.AddHandler(c.onGuildDelete)
	sess.AddHandler(c.onChannelCreate)
	sess.AddHandler(c.onChannelUpdate)
	sess.AddHandler(c.onChannelDelete)
	sess.AddHandler(c.onThreadCreate)
	sess.AddHandler(c.onThreadUpdate)
	sess.AddHandler(c.onThreadDelete)
	sess.AddHandler(c.onThreadListSync)
	sess.AddHandler(c.onGuildMemberUpdate)
	return c, nil
}

// Name implements channels.Channel.
func (c *Channel) Name() string { return Name }

// Healthy reports whether the gateway is connected, for /readyz.
func (c *Channel) Healthy() error { return c.health.get() }

// Run connects to the gateway and publishes inbound messages until ctx ends.
// It reconnects (resuming when Discord allows) with capped exponential
// backoff, and returns nil on a clean shutdown or an error when Discord
// refuses the bot for good (bad token, Message Content intent not enabled).
func (c *Channel) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("discord: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lanes := channels.NewLanes(256)
	c.lanes.Store(lanes)
	c.runCtx.Store(&ctx)

	var wg, catching sync.WaitGroup
	wctx, stopWriter := context.WithCancel(context.Background())
	if c.cursors != nil {
		// A KV store waits here for NATS: catching up on cursors that are
		// not loaded yet would fetch nothing, and saving them would
		// overwrite the ones kept.
		if err := c.cursors.load(ctx); err != nil && ctx.Err() == nil { // stopped while waiting: no error
			c.log.Error("discord cursors not loaded", zap.Error(err))
		}
		// The writer outlives the lanes: the acks of the messages they
		// drain must reach the file.
		wg.Add(1)
		go func() { defer wg.Done(); c.cursors.writer(wctx) }()
		catching.Add(1)
		go func() { defer catching.Done(); c.catchUpLoop(ctx) }()
	}

	err := c.connectLoop(ctx)
	cancel() // also when Discord refused the bot: queued messages stop early

	// Close sends a close frame (1000: the session ends) and sleeps a
	// second inside discordgo; then the reader has stopped, no handler runs
	// any more and the lanes can be drained.
	if cerr := c.sess.Close(); cerr != nil {
		c.log.Warn("closing gateway", zap.Error(cerr))
	}
	c.dial.closeConn()
	catching.Wait() // it queues on the lanes
	lanes.Close()
	stopWriter()
	wg.Wait()
	// Keep-alive connections hold goroutines; Send opens new ones if the
	// manager still delivers after Run.
	c.sess.Client.CloseIdleConnections()
	c.http.CloseIdleConnections()
	c.health.set(errors.New("discord: stopped"))
	c.log.Info("discord channel stopped")
	return err
}

// connectLoop opens the gateway and waits for it to drop, again and again,
// until ctx ends or Discord refuses the bot.
func (c *Channel) connectLoop(ctx context.Context) error {
	const (
		minBackoff  = time.Second
		maxBackoff  = 2 * time.Minute
		stableAfter = time.Minute
	)
	backoff := time.Duration(0)
	registered := false
	for {
		if backoff > 0 {
			// Jitter in the upper half, so a fleet does not reconnect in step.
			wait := backoff/2 + rand.N(backoff/2+1)
			c.log.Info("reconnecting to the gateway", zap.Duration("after", wait))
			if clock.Sleep(ctx, c.deps.Clock, wait) != nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		drain(c.disconnected)
		err := c.open(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if fatal := fatalGatewayError(err); fatal != nil {
				c.health.set(fatal)
				c.log.Error("discord refused the bot; not reconnecting", zap.Error(fatal))
				return fatal
			}
			c.health.set(fmt.Errorf("discord: gateway: %w", err))
			c.log.Warn("gateway connection failed", zap.Error(err))
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			continue
		}
		if !registered {
			if err := c.registerCommands(ctx, c.state.app()); err != nil {
				c.log.Warn("slash commands not registered; typed commands still work", zap.Error(err))
			}
			registered = true // once per start: a failure will not fix itself
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.disconnected:
		}
		if c.deps.Clock.Now().Sub(c.connectedAt()) >= stableAfter {
			backoff = 0 // a long-lived connection dropped: come back at once
		} else {
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
		}
	}
}

// open runs discordgo's Open, which has no context: if ctx ends or the
// handshake stalls, the dialer's connection is closed under it.
func (c *Channel) open(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	stop := context.AfterFunc(octx, c.dial.closeConn)
	defer stop()
	err := c.sess.Open()
	if errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		return nil
	}
	return err
}

// fatalGatewayError returns a readable error when the gateway closed with a
// code Discord documents as "do not reconnect", else nil.
func fatalGatewayError(err error) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return nil
	}
	switch ce.Code {
	case 4004:
		return fmt.Errorf("discord: authentication failed (4004): check channels.discord.token: %w", err)
	case 4010, 4011:
		return fmt.Errorf("discord: sharding refused (%d): %w", ce.Code, err)
	case 4012:
		return fmt.Errorf("discord: API version refused (4012): %w", err)
	case 4013:
		return fmt.Errorf("discord: invalid intents (4013): %w", err)
	case 4014:
		return fmt.Errorf("discord: disallowed intents (4014): enable the Message Content intent "+
			"for the bot in the Discord developer portal (Bot → Privileged Gateway Intents): %w", err)
	}
	return nil
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// gatewayDialer dials the gateway and remembers the connection, so a stuck
// handshake or a shutdown can close it under discordgo's blocking reads.
type gatewayDialer struct {
	d    net.Dialer
	mu   sync.Mutex
	conn net.Conn
}

func (g *gatewayDialer) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := g.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conn = conn
	g.mu.Unlock()
	return conn, nil
}

func (g *gatewayDialer) closeConn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn != nil {
		_ = g.conn.Close()
		g.conn = nil
	}
}

// health is the gateway's state for /readyz, and when it last connected.
type health struct {
	mu    sync.Mutex
	err   error
	since time.Time
}

func (h *health) set(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

func (h *health) connected(at time.Time) {
	h.mu.Lock()
	h.err, h.since = nil, at
	h.mu.Unlock()
}

func (c *Channel) connectedAt() time.Time {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.since
}

func (h *health) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (c *Channel) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User != nil {
		c.state.setBot(r.User.ID)
	}
	if r.Application != nil {
		c.state.setApp(r.Application.ID)
	}
	c.log.Info("gateway ready", zap.Int("guilds", len(r.Guilds)))
	if c.cursors != nil {
		// A new session: Discord will not replay what was posted before
		// it, so the chats the bot answers in are fetched.
		c.cursors.freeze()
		select {
		case c.catchUpDue <- struct{}{}:
		default:
		}
	}
}

func (c *Channel) onResumed(_ *discordgo.Session, _ *discordgo.Resumed) {
	c.log.Info("gateway session resumed")
}

// onConnect runs inside Open once READY or RESUMED arrived, before the
// reader starts: health is up before any message is handled.
func (c *Channel) onConnect(_ *discordgo.Session, _ *discordgo.Connect) {
	c.health.connected(c.deps.Clock.Now())
}

func (c *Channel) onDisconnect(_ *discordgo.Session, _ *discordgo.Disconnect) {
	c.health.set(errors.New("discord: gateway disconnected"))
	select {
	case c.disconnected <- struct{}{}:
	default:
	}
}
