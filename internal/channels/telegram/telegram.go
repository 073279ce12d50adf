// Package telegram is the Telegram channel (docs/telegram.md): it receives
// messages by long polling or a webhook, passes them through the shared
// inbound gate (access, dedupe, limits) onto the bus, and sends, edits and
// deletes messages for the channel manager, rendering Markdown as Telegram
// HTML. It uses github.com/go-telegram/bot for the Bot API methods but polls
// and confirms updates itself, so an update is only forgotten once the agent
// has recorded it.
package telegram

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Name is the channel's name on the bus.
const Name = "telegram"

// Deps are what the Telegram channel needs besides its config.
type Deps struct {
	// Bus receives inbound messages and the channel layer's own short
	// replies (/whoami, pairing codes, "transcription is off").
	Bus channels.Publisher
	// Pairing is the shared pairing store; required when policy is pairing.
	Pairing channels.Pairing
	// DataDir holds the update journal (telegram-updates.json), so a restart
	// neither drops nor re-answers a message. Empty keeps it in memory only.
	DataDir string
	// Workspace is where documents are saved, under inbox/.
	Workspace string
	// Transcription is the voice transcription endpoint; empty BaseURL
	// turns transcription off.
	Transcription config.TranscriptionConfig
	// Limits bounds inbound messages (length, rate, dedupe); Channel is set
	// by the adapter.
	Limits channels.IntakeConfig
	// HTTPClient replaces the Bot API client (tests); nil builds one that
	// honours cfg.Proxy.
	HTTPClient *http.Client
	// TranscriptionClient is used for the transcription endpoint [a plain
	// client with a 2-minute timeout].
	TranscriptionClient *http.Client
	// Meter counts and admits transcriptions (the usage ledger and
	// budget); nil counts nothing.
	Meter channels.Meter
	// AlbumWait is how long the parts of an album are collected; zero means
	// DefaultAlbumWait. A test seam, not a key (see DefaultAlbumWait).
	AlbumWait time.Duration
	// CallTimeout bounds every Bot API call other than getUpdates; zero
	// means DefaultCallTimeout. A test seam, not a key.
	CallTimeout time.Duration
}

// DefaultAlbumWait is how long the parts of an album are collected before
// they go to the agent as one message. Telegram sends an album's parts within
// a few hundred milliseconds of each other; no user has a reason to tune
// this, so it is not a config key (tests shorten it through Deps).
const DefaultAlbumWait = 1500 * time.Millisecond

// DefaultCallTimeout bounds every Bot API call other than getUpdates (whose
// bound is channels.telegram.poll_timeout plus stall_grace). Not a config
// key: it only has to be longer than a healthy call; tests shorten it.
const DefaultCallTimeout = 30 * time.Second

// Channel is the Telegram adapter. Create it with New, run it with Run, and
// register it (with NewRenderer) on a channels.Manager.
type Channel struct {
	cfg    Config
	deps   Deps
	log    *zap.Logger
	token  string
	apiURL string
	http   *http.Client
	api    *bot.Bot
	intake *channels.Intake
	access *channels.Access
	tx     channels.Transcriber // nil when transcription is off

	journal *journal
	me      atomic.Pointer[models.User]

	// lanes and albums are set while Run accepts updates; the webhook
	// answers 503 otherwise, so Telegram redelivers later.
	runMu   sync.RWMutex
	lanes   *channels.Lanes
	handCtx context.Context
	albums  *albums

	health atomic.Pointer[error]
	stalls atomic.Int64
}

var (
	_ channels.Channel  = (*Channel)(nil)
	_ channels.Editor   = (*Channel)(nil)
	_ channels.Deleter  = (*Channel)(nil)
	_ channels.Typer    = (*Channel)(nil)
	_ channels.Healther = (*Channel)(nil)
)

// New builds the channel from its config, which must come from config.Load
// (or config.Defaults) and pass Validate: New takes its values as they are
// and defaults none of them. It does no I/O.
func New(cfg Config, deps Deps, log *zap.Logger) (*Channel, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("channels.telegram.token: must not be empty")
	}
	if deps.Bus == nil {
		return nil, errors.New("telegram: no bus")
	}
	if cfg.APIURL == "" {
		return nil, errors.New("channels.telegram.api_url: must not be empty (start from config.Defaults)")
	}
	if _, err := url.Parse(cfg.APIURL); err != nil {
		return nil, fmt.Errorf("channels.telegram.api_url: %w", err)
	}
	switch cfg.Mode {
	case "polling":
	case "webhook":
		if _, err := webhookPath(cfg.WebhookURL); err != nil {
			return nil, err
		}
		if cfg.WebhookSecret == "" {
			return nil, errors.New("channels.telegram.webhook_secret: must be set in webhook mode")
		}
	default:
		return nil, fmt.Errorf("channels.telegram.mode: %q is not polling or webhook", cfg.Mode)
	}
	if deps.AlbumWait <= 0 {
		deps.AlbumWait = DefaultAlbumWait
	}
	if deps.CallTimeout <= 0 {
		deps.CallTimeout = DefaultCallTimeout
	}
	access, err := channels.NewAccess(Name, cfg.Access, deps.Pairing)
	if err != nil {
		return nil, err
	}
	hc, err := newHTTPClient(deps.HTTPClient, cfg.Proxy)
	if err != nil {
		return nil, err
	}
	c := &Channel{
		cfg:    cfg,
		deps:   deps,
		log:    log,
		token:  cfg.Token,
		apiURL: strings.TrimRight(cfg.APIURL, "/"),
		http:   hc,
		access: access,
	}
	c.api, err = bot.New(cfg.Token,
		bot.WithSkipGetMe(),
		bot.WithServerURL(c.apiURL),
		bot.WithHTTPClient(cfg.PollTimeout, traceClient{hc}),
		bot.WithErrorsHandler(func(err error) { log.Debug("bot library", zap.String("error", c.scrub(err.Error()))) }),
		bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	limits := deps.Limits
	limits.Channel = Name
	c.intake = channels.NewIntake(limits, access, deps.Bus, log)
	c.tx = channels.NewTranscriber(deps.Transcription, deps.TranscriptionClient, deps.Meter)
	jpath := ""
	if deps.DataDir != "" {
		jpath = filepath.Join(deps.DataDir, JournalFile)
	}
	c.journal = newJournal(jpath, log)
	unstarted := errors.New("telegram: not started")
	c.health.Store(&unstarted)
	return c, nil
}

// Name returns "telegram".
func (c *Channel) Name() string { return Name }

// Healthy reports nil while the channel is connected: the last getUpdates
// answered (polling) or the webhook is set.
func (c *Channel) Healthy() error { return *c.health.Load() }

func (c *Channel) setHealth(err error) { c.health.Store(&err) }

// Run connects (getMe, setMyCommands, webhook set or removed), replays
// updates journaled but never acknowledged, and receives updates until ctx
// ends. On the way out it stops taking updates, waits for the handlers in
// flight, and writes the journal; acknowledgements that come later (turns
// the daemon lets finish after intake stopped) are written as they come. It
// returns nil on a clean shutdown and an error only when the token is refused.
func (c *Channel) Run(ctx context.Context) error {
	if err := c.journal.load(); err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	if c.deps.DataDir == "" {
		c.log.Warn("no data dir: unacknowledged updates are lost on a crash")
	}
	me, err := c.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c.me.Store(me)
	c.log.Info("connected", zap.String("bot", "@"+me.Username), zap.String("mode", c.cfg.Mode))

	var bg sync.WaitGroup
	jctx, stopJournal := context.WithCancel(context.Background())
	bg.Add(1)
	go func() {
		defer bg.Done()
		c.journal.writer(jctx)
	}()

	lanes := channels.NewLanes(1024)
	albums := newAlbums(c.deps.AlbumWait)
	c.runMu.Lock()
	c.lanes, c.albums = lanes, albums
	c.handCtx = context.WithoutCancel(ctx)
	c.runMu.Unlock()

	// Updates received before the last shutdown and never answered come
	// back; when polling they wait for the first getUpdates, so that with
	// what was sent meanwhile they are one backlog (acceptBacklog).
	replay := c.journal.replay()
	if len(replay) > 0 {
		c.log.Info("replaying updates received before the last shutdown but never answered", zap.Int("updates", len(replay)))
	}
	if c.cfg.Mode == "webhook" {
		c.acceptBacklog(ctx, replay)
		c.runWebhook(ctx)
	} else {
		c.poll(ctx, replay)
	}

	// Stop taking updates, hand over albums still collecting, then let the
	// handlers in flight finish (the bot library would not wait for them).
	c.runMu.Lock()
	c.albums, c.lanes = nil, nil
	c.runMu.Unlock()
	albums.flush()
	lanes.Close()
	stopJournal()
	bg.Wait()
	if err := c.journal.finish(); err != nil {
		c.log.Error("update journal not written", zap.Error(err))
	}
	c.setHealth(errors.New("telegram: stopped"))
	return nil
}

// connect calls getMe until it answers (retrying transient failures) and
// registers the command list. A refused token is fatal.
func (c *Channel) connect(ctx context.Context) (*models.User, error) {
	wait := time.Second
	for {
		cctx, cancel := context.WithTimeout(ctx, c.deps.CallTimeout)
		me, err := c.api.GetMe(cctx)
		cancel()
		if err == nil {
			c.setCommands(ctx)
			return me, nil
		}
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			err = fmt.Errorf("telegram: the bot token was refused (check channels.telegram.token): %s", c.scrub(err.Error()))
			c.setHealth(err)
			return nil, err
		}
		c.setHealth(fmt.Errorf("telegram getMe: %s", c.scrub(err.Error())))
		c.log.Warn("telegram unreachable; retrying", zap.Duration("in", wait), zap.String("error", c.scrub(err.Error())))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

func (c *Channel) setCommands(ctx context.Context) {
	var cmds []models.BotCommand
	for _, cmd := range commands.Menu() {
		cmds = append(cmds, models.BotCommand{Command: cmd.Name, Description: cmd.Description})
	}
	cctx, cancel := context.WithTimeout(ctx, c.deps.CallTimeout)
	defer cancel()
	if _, err := c.api.SetMyCommands(cctx, &bot.SetMyCommandsParams{Commands: cmds}); err != nil {
		c.log.Warn("setMyCommands failed; the command menu may be stale", zap.String("error", c.scrub(err.Error())))
	}
}

// accept takes one update from Telegram (poll, webhook or replay): albums
// are collected, everything else goes to its chat's lane.
func (c *Channel) accept(ctx context.Context, raw json.RawMessage) {
	if u, ok := c.decode(raw); ok {
		c.dispatch(ctx, u, false)
	}
}

// acceptBacklog takes the updates of a start — those replayed from the
// journal and the first getUpdates' — as one backlog: in each chat (a
// forum topic apart) every message but the last is marked as followed by
// more (bus.InboundMessage.More), so a turn a restart cut is resumed with
// what the user sent while the daemon was down, and answered once.
func (c *Channel) acceptBacklog(ctx context.Context, raws []json.RawMessage) {
	var ups []models.Update
	for _, raw := range raws {
		if u, ok := c.decode(raw); ok {
			ups = append(ups, u)
		}
	}
	last := map[string]int{}
	for i, u := range ups {
		if plain(u.Message) {
			last[backlogKey(u.Message)] = i
		}
	}
	for i, u := range ups {
		c.dispatch(ctx, u, plain(u.Message) && i < last[backlogKey(u.Message)])
	}
}

// plain reports a message handed over on its own (not an album's part,
// which waits for the rest of its album).
func plain(m *models.Message) bool { return m.MediaGroupID == "" || m.EditDate != 0 }

// backlogKey is the session m goes to: a backlog is one per session.
func backlogKey(m *models.Message) string {
	return SessionKey(channels.Chat{ID: strconv.FormatInt(m.Chat.ID, 10), Metadata: map[string]string{MetaThreadID: topic(m)}})
}

// decode reads an update; one that is not a message to handle is
// acknowledged at once and reported false.
func (c *Channel) decode(raw json.RawMessage) (models.Update, bool) {
	u, err := decodeUpdate(raw)
	if err != nil {
		c.log.Warn("undecodable update skipped", zap.Error(err))
		c.journal.ack(peekID(raw))
		return models.Update{}, false
	}
	if m := u.Message; m == nil || liveLocationMoved(m) {
		c.journal.ack(u.ID)
		return models.Update{}, false
	}
	return u, true
}

// dispatch puts a decoded message on its chat's lane, or its album.
func (c *Channel) dispatch(ctx context.Context, u models.Update, more bool) {
	m := u.Message
	c.runMu.RLock()
	lanes, albums := c.lanes, c.albums
	c.runMu.RUnlock()
	if lanes == nil {
		return // shutting down: stays in the journal, replayed next start
	}
	key := strconv.FormatInt(m.Chat.ID, 10)
	run := func() { c.handle([]*models.Update{&u}, more) }
	if !plain(m) {
		g := albums.add(&u)
		if g == nil {
			return // a later part: its album is in line already
		}
		run = func() { c.handle(g.collected(), false) }
	}
	if err := lanes.Go(ctx, key, run); err != nil {
		c.log.Debug("update left for replay", zap.Int64("update", u.ID), zap.Error(err))
	}
}

// liveLocationMoved reports an edit that only moves a live location:
// Telegram sends one every few seconds while a location is shared live, and
// none of them is a message.
func liveLocationMoved(m *models.Message) bool {
	return m.EditDate != 0 && m.Location != nil && m.Location.LivePeriod > 0
}

// messageUpdate is the part of an update the channel reads: it asks for
// message updates only (allowed_updates). Decoding a models.Update instead
// has encoding/json build, on the first update, and keep for the life of the
// process, its field cache for every kind of update there is, about twice
// what messages alone take (sizes: docs/BENCHMARKS.md#figures-behind-code-choices).
// The message is decoded apart: encoding/json builds a struct's cache, and
// the encoders of every type it reaches, as soon as that struct is decoded,
// so a *models.Message field would cost its cache at the first update even
// without a message in it.
type messageUpdate struct {
	ID      int64           `json:"update_id"`
	Message json.RawMessage `json:"message"`
	Edited  json.RawMessage `json:"edited_message"`
}

// decodeUpdate reads the update in raw; its Message is nil when it has none.
// An edited_message is decoded as the Message too: its edit_date, which
// Telegram sets on every edit, tells it from a new one.
func decodeUpdate(raw json.RawMessage) (models.Update, error) {
	var in messageUpdate
	if err := json.Unmarshal(raw, &in); err != nil {
		return models.Update{}, err
	}
	u := models.Update{ID: in.ID}
	edited := len(in.Message) == 0 || string(in.Message) == "null"
	if edited {
		in.Message = in.Edited
	}
	if len(in.Message) == 0 || string(in.Message) == "null" {
		return u, nil
	}
	u.Message = new(models.Message)
	if err := json.Unmarshal(in.Message, u.Message); err != nil {
		return models.Update{}, fmt.Errorf("message: %w", err)
	}
	if edited && u.Message.EditDate == 0 {
		u.Message.EditDate = max(u.Message.Date, 1) // an edit all the same
	}
	return u, nil
}

// peekID returns a raw update's update_id, 0 if it has none. raw is one
// valid JSON value, as every caller has it (getUpdates' response and the
// journal's records are decoded, a webhook body is checked). The id is read
// for every update three times (the journal, the poll's offset, the ack),
// so the form the Bot API writes, {"update_id":N,... with the id first, is
// read directly; anything else, or an update that names update_id again
// (JSON takes the last), is decoded. TestPeekIDIsDecoding holds the two to
// each other.
func peekID(raw json.RawMessage) int64 {
	if rest, ok := bytes.CutPrefix(raw, updateIDPrefix); ok {
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		// 18 digits always fit an int64; a leading zero is not JSON.
		if n > 0 && n <= 18 && (n == 1 || rest[0] != '0') && n < len(rest) && (rest[n] == ',' || rest[n] == '}') &&
			!bytes.Contains(rest[n:], updateIDName) {
			if id, err := strconv.ParseInt(string(rest[:n]), 10, 64); err == nil {
				return id
			}
		}
	}
	return decodeID(raw)
}

var (
	updateIDPrefix = []byte(`{"update_id":`)
	updateIDName   = []byte("update_id")
)

// decodeID is peekID by decoding.
func decodeID(raw json.RawMessage) int64 {
	var v struct {
		ID int64 `json:"update_id"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.ID
}

// webhookPath returns the path part of the public webhook URL, which is
// where the daemon mounts WebhookHandler.
func webhookPath(webhookURL string) (string, error) {
	u, err := url.Parse(webhookURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("channels.telegram.webhook_url: %q must be an https URL in webhook mode", webhookURL)
	}
	if u.Path == "" {
		return "/", nil
	}
	return u.Path, nil
}

// WebhookHandler returns the path to mount on the gateway's HTTP listener
// and the handler for Telegram's webhook calls. The handler checks the
// secret token, journals the update, hands it over, and answers 200 only
// once the journal is fsync'd, so a crash never loses an update Telegram
// believes delivered.
func (c *Channel) WebhookHandler() (string, http.Handler) {
	path, _ := webhookPath(c.cfg.WebhookURL)
	return path, http.HandlerFunc(c.serveWebhook)
}

func (c *Channel) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.cfg.WebhookSecret)) != 1 {
		c.log.Warn("webhook call with a wrong secret token refused", zap.String("remote", r.RemoteAddr))
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxResponseBody))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if !json.Valid(body) {
		c.log.Warn("webhook body is not JSON")
		w.WriteHeader(http.StatusOK) // redelivering it would not help
		return
	}
	c.runMu.RLock()
	running := c.lanes != nil
	c.runMu.RUnlock()
	if !running {
		http.Error(w, "not running", http.StatusServiceUnavailable)
		return
	}
	fresh, syncJournal, err := c.journal.received([]json.RawMessage{body}, false)
	if err != nil {
		c.log.Error("update journal not written; asking Telegram to redeliver", zap.Error(err))
		http.Error(w, "journal", http.StatusInternalServerError)
		return
	}
	// The turn starts while the update is fsync'd; 200 waits for the fsync.
	for _, raw := range fresh {
		c.accept(r.Context(), raw)
	}
	if err := syncJournal(); err != nil {
		c.log.Error("update journal not synced; asking Telegram to redeliver", zap.Error(err))
		http.Error(w, "journal", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// runWebhook registers the webhook and waits for shutdown; updates arrive
// through WebhookHandler on the daemon's listener.
func (c *Channel) runWebhook(ctx context.Context) {
	wait := time.Second
	for {
		cctx, cancel := context.WithTimeout(ctx, c.deps.CallTimeout)
		_, err := c.api.SetWebhook(cctx, &bot.SetWebhookParams{
			URL: c.cfg.WebhookURL, SecretToken: c.cfg.WebhookSecret,
			AllowedUpdates: allowedUpdates,
		})
		cancel()
		if err == nil {
			c.setHealth(nil)
			break
		}
		c.setHealth(fmt.Errorf("telegram setWebhook: %s", c.scrub(err.Error())))
		c.log.Warn("setWebhook failed; retrying", zap.Duration("in", wait), zap.String("error", c.scrub(err.Error())))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
	<-ctx.Done()
}
