// Package matrix is the Matrix channel (docs/matrix.md): it long-polls the
// homeserver's /sync with a persisted next_batch (state.go), so a restart
// neither loses nor repeats a message and catches up what came while it was
// down; turns the room messages it may answer into bus.InboundMessages
// through the shared intake (inbound.go, kinds.go), with DMs and rooms
// under the common access rules; joins invites from allowed users; and
// sends, edits (m.replace), redacts and types over the client-server API
// for the channel-neutral manager in package channels (send.go).
//
// It is built on maunium.net/go/mautrix, the maintained Go client the
// Matrix bridges run on, with these departures from its defaults: the sync
// loop is ours (mautrix's saves next_batch before the events are handled,
// which loses them in a crash), its HTTP retries and 429 sleeps are off
// (the manager retries, knowing what is safe to repeat), and its zerolog
// output is off (we log with zap). End-to-end encryption is not linked:
// encrypted rooms are not read, and the room is told so once.
package matrix

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Name is the channel's name on the bus.
const Name = "matrix"

// StateFile is the sync position's file in the data dir; LoginFile holds
// the token a password login got.
const (
	StateFile = "matrix-sync.json"
	LoginFile = "matrix-login.json"
)

// Transcriber turns a voice message into text (an OpenAI-compatible
// /audio/transcriptions endpoint).
type Transcriber interface {
	Transcribe(ctx context.Context, filename, mime string, audio []byte) (string, error)
}

// Deps are the channel's collaborators.
type Deps struct {
	// Bus receives inbound messages and the intake's own short replies.
	// Required.
	Bus channels.Publisher
	// Pairing is the shared pairing store; required with policy pairing.
	Pairing channels.Pairing
	// Workspace is the agent's workspace root: received files are saved
	// under <workspace>/inbox/, outbound file_ref paths are resolved in it.
	Workspace string
	// Transcription is the endpoint voice messages are transcribed with;
	// an empty BaseURL turns transcription off.
	Transcription config.TranscriptionConfig
	// Meter counts and admits transcriptions; nil counts nothing.
	Meter channels.Meter
	// Transcriber replaces the client built from Transcription (tests).
	Transcriber Transcriber
	// HTTPTransport is the base transport (default: a clone of
	// http.DefaultTransport, proxy from the environment).
	HTTPTransport http.RoundTripper
	// Clock drives the reconnect backoff (default: the system clock).
	Clock clock.Clock
	// Limits bound what senders can push; Channel and Clock are filled in.
	Limits channels.IntakeConfig
	// DataDir holds StateFile and LoginFile. Without it (and without
	// State) the sync position is not kept: a restart answers nothing
	// that came while it was down.
	DataDir string
	// State, when set, keeps the sync position instead of DataDir (a KV
	// bucket when the channels process is scaled out).
	State Store
}

// Channel is the Matrix adapter. Create it with New, then Run it; Send,
// Edit, Delete and Typing may be called concurrently at any time.
type Channel struct {
	cfg    Config
	deps   Deps
	log    *zap.Logger
	cli    *mautrix.Client
	bot    id.UserID
	intake *channels.Intake
	access *channels.Access
	state  *syncState
	rooms  roomCache
	// timelineLimit is the sync filter's events per room (timelineLimit;
	// tests lower it to make a gap).
	timelineLimit int

	running atomic.Bool
	health  atomic.Pointer[error]
	// displayName is the bot's global display name, read at start, for
	// mentions written as a pill with its name.
	displayName atomic.Pointer[string]
}

var (
	_ channels.Channel  = (*Channel)(nil)
	_ channels.Editor   = (*Channel)(nil)
	_ channels.Deleter  = (*Channel)(nil)
	_ channels.Typer    = (*Channel)(nil)
	_ channels.Healther = (*Channel)(nil)
)

// New builds the channel from cfg, which must have passed Validate. It does
// no I/O.
func New(cfg Config, deps Deps, log *zap.Logger) (*Channel, error) {
	var problems config.Problems
	cfg.validate(false, &problems)
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("matrix: %w", err)
	}
	if deps.Bus == nil {
		return nil, errors.New("matrix: no bus")
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
	cli, err := mautrix.NewClient(cfg.Homeserver, id.UserID(cfg.UserID), strings.TrimSpace(cfg.AccessToken))
	if err != nil {
		return nil, fmt.Errorf("matrix: homeserver: %w", err)
	}
	base := deps.HTTPTransport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	// The long poll holds a request for syncTimeout; the client's own
	// timeout must outlast it.
	cli.Client = &http.Client{Transport: base, Timeout: syncTimeout + 30*time.Second}
	cli.DeviceID = id.DeviceID(cfg.DeviceID)
	cli.Log = zerolog.Nop()
	cli.DefaultHTTPRetries = 0
	cli.IgnoreRateLimit = true
	cli.UserAgent = "nanobot"
	store := deps.State
	if store == nil && deps.DataDir != "" {
		store = FileStore{Path: filepath.Join(deps.DataDir, StateFile)}
	}
	c := &Channel{cfg: cfg, deps: deps, log: log, cli: cli, bot: id.UserID(cfg.UserID), access: access,
		state: newSyncState(store), timelineLimit: timelineLimit}
	deps.Limits.Channel, deps.Limits.Clock = Name, deps.Clock
	c.intake = channels.NewIntake(deps.Limits, access, deps.Bus, log)
	c.rooms.init()
	c.setHealth(errors.New("matrix: not connected yet"))
	return c, nil
}

// Name implements channels.Channel.
func (c *Channel) Name() string { return Name }

// Healthy reports whether the last /sync succeeded, for /readyz.
func (c *Channel) Healthy() error {
	if p := c.health.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Channel) setHealth(err error) { c.health.Store(&err) }

// Run logs in if it must, then syncs and publishes inbound messages until
// ctx ends. It retries a failing homeserver with capped, jittered backoff,
// and returns nil on a clean shutdown or an error when the homeserver
// refuses the bot's credentials for good.
func (c *Channel) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("matrix: Run called twice")
	}
	defer c.cli.Client.CloseIdleConnections()
	lanes := channels.NewLanes(256)
	defer lanes.Close()
	err := c.retry(ctx, "log in", func() error { return c.authenticate(ctx) })
	if err == nil {
		err = c.retry(ctx, "load the sync position", func() error { return c.state.load(ctx) })
	}
	if err == nil {
		c.loadDisplayName(ctx)
		err = c.syncLoop(ctx, lanes)
	}
	if serr := c.state.save(context.WithoutCancel(ctx)); serr != nil {
		c.log.Error("matrix sync position not saved; the next start repeats what this one handled", zap.Error(serr))
	}
	c.setHealth(errors.New("matrix: stopped"))
	if ctx.Err() != nil {
		c.log.Info("matrix channel stopped")
		return nil
	}
	return err
}

// Backoff bounds for a failing homeserver.
const (
	minBackoff = time.Second
	maxBackoff = 2 * time.Minute
)

// retry runs step until it succeeds, fails for good (errFatal), or ctx
// ends, waiting a capped, jittered, doubling backoff between tries.
func (c *Channel) retry(ctx context.Context, what string, step func() error) error {
	backoff := time.Duration(0)
	for {
		err := step()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, errFatal) {
			c.setHealth(err)
			c.log.Error("matrix refused the bot; not retrying", zap.String("step", what), zap.Error(err))
			return err
		}
		c.setHealth(fmt.Errorf("matrix: %s: %w", what, err))
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		if rl := (*channels.RateLimitError)(nil); errors.As(err, &rl) {
			wait = max(wait, rl.RetryAfter) // the server said how long
		}
		c.log.Warn("matrix call failed; retrying", zap.String("step", what), zap.Duration("after", wait), zap.Error(err))
		if clock.Sleep(ctx, c.deps.Clock, wait) != nil {
			return ctx.Err()
		}
	}
}

// errFatal marks a failure that retrying cannot fix (a refused token);
// fatal attaches it without changing the message.
var errFatal = errors.New("matrix: not retried")

type fatal struct{ error }

func (f fatal) Unwrap() error        { return f.error }
func (f fatal) Is(target error) bool { return target == errFatal }

// loadDisplayName reads the bot's display name, for mention gating; a
// failure leaves mentions by user id and by room display name working.
func (c *Channel) loadDisplayName(ctx context.Context) {
	resp, err := c.cli.GetOwnDisplayName(ctx)
	if err != nil {
		c.log.Info("bot display name not read; mentions by name need the room's member list", zap.Error(err))
		return
	}
	name := resp.DisplayName
	c.displayName.Store(&name)
}

// roomCache remembers, per room, who is in it and how they are named, so
// a DM is told from a group and a name pill from other words. It is filled
// from /joined_members on first use and kept by the membership events the
// sync brings.
type roomCache struct {
	mu    sync.Mutex
	rooms map[id.RoomID]*roomInfo
}

type roomInfo struct {
	members map[id.UserID]string // display names
	direct  bool                 // the invite said is_direct
}

func (r *roomCache) init() { r.rooms = map[id.RoomID]*roomInfo{} }

// info returns the room's members, fetching them when unknown.
func (c *Channel) roomInfo(ctx context.Context, room id.RoomID) (roomInfo, error) {
	c.rooms.mu.Lock()
	ri := c.rooms.rooms[room]
	if ri != nil && ri.members != nil {
		out := roomInfo{members: make(map[id.UserID]string, len(ri.members)), direct: ri.direct}
		for k, v := range ri.members {
			out.members[k] = v
		}
		c.rooms.mu.Unlock()
		return out, nil
	}
	c.rooms.mu.Unlock()
	resp, err := c.cli.JoinedMembers(ctx, room)
	if err != nil {
		return roomInfo{}, classify("joined members of "+string(room), err)
	}
	members := make(map[id.UserID]string, len(resp.Joined))
	for u, m := range resp.Joined {
		members[u] = m.DisplayName
	}
	c.rooms.mu.Lock()
	defer c.rooms.mu.Unlock()
	if ri = c.rooms.rooms[room]; ri == nil {
		ri = &roomInfo{}
		c.rooms.rooms[room] = ri
	}
	if ri.members == nil {
		ri.members = members
	}
	out := roomInfo{members: make(map[id.UserID]string, len(ri.members)), direct: ri.direct}
	for k, v := range ri.members {
		out.members[k] = v
	}
	return out, nil
}

// member records a membership change seen in the sync.
func (c *Channel) member(room id.RoomID, user id.UserID, joined bool, name string) {
	c.rooms.mu.Lock()
	defer c.rooms.mu.Unlock()
	ri := c.rooms.rooms[room]
	if ri == nil || ri.members == nil {
		return // fetched whole on first use
	}
	if joined {
		ri.members[user] = name
	} else {
		delete(ri.members, user)
	}
}

func (c *Channel) markDirect(room id.RoomID) {
	c.rooms.mu.Lock()
	defer c.rooms.mu.Unlock()
	ri := c.rooms.rooms[room]
	if ri == nil {
		ri = &roomInfo{}
		c.rooms.rooms[room] = ri
	}
	ri.direct = true
}

func (c *Channel) forgetRoom(room id.RoomID) {
	c.rooms.mu.Lock()
	defer c.rooms.mu.Unlock()
	delete(c.rooms.rooms, room)
}

// isDM reports whether a room is a direct chat: the invite said so, or
// nobody but the bot and one person is in it.
func (ri roomInfo) isDM() bool { return ri.direct || len(ri.members) <= 2 }
