package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Discord does not redeliver: a message posted while the bot is down, or
// while it reconnects with a new session (op 9, close 4009, or discordgo
// re-identifying where Discord would have resumed), never arrives over the
// gateway. cursors remember, per chat the bot answers in, how far its message
// history has been handled, so after a start or a new session the adapter
// fetches what it missed over REST (see catchup.go) and answers it once.
//
// A message is pending from the moment it is seen until its turn's answer
// was delivered or it was deliberately dropped (bus.InboundMessage.Ack). A
// chat's Done only moves past handled ids below every pending one, so a
// crash mid-turn brings the message back after the restart, where the agent
// recognises it in the session and resumes or resends rather than answering
// twice. Ids handled above Done are kept (Handled) so they are not taken up
// again. While a chat waits for its catch-up, Done does not move at all:
// the ids between it and the live messages were never seen.
//
// The document is saved (CursorStore: a file, or a KV key when scaled out)
// by one writer goroutine, which coalesces the changes that pile up while
// it writes; only a chat's first tracking is saved at once, before its
// message goes on.

// maxHandled bounds a chat's Handled list while an old message stays
// pending (a long turn in a busy guild channel); beyond it the oldest are
// forgotten, which can only make a restart look at them again.
const maxHandled = 5000

// maxTracked bounds the chats caught up after a start, most recent first.
const maxTracked = 200

// forgetAfter is how long a chat stays tracked after the bot last answered
// there: a message posted there while the bot is away is only fetched if
// the chat was active within it.
const forgetAfter = 30 * 24 * time.Hour

type cursor struct {
	guild   string
	done    uint64   // every message up to this id was handled
	handled []uint64 // handled ids above done, sorted
	active  time.Time
	// edits: every edit in the chat up to this time was handled (live, or
	// by a catch-up); a catch-up takes up the edits made after it. It moves
	// with each edit handled and, while the chat is live, with each save.
	edits time.Time
	// tracked: a message of this chat reached the agent, so it is kept on
	// disk and caught up; other chats are only followed while a message is
	// pending.
	tracked bool
	frozen  bool // a catch-up is due: done stays where it is
	pending map[uint64]struct{}
	// held are live messages that arrived while the chat waited for its
	// catch-up: handled after it, so the chat's messages keep their order.
	held []func()
}

type cursorFile struct {
	Version int                        `json:"version"`
	Chats   map[string]cursorFileEntry `json:"chats"`
}

type cursorFileEntry struct {
	Guild   string    `json:"guild,omitempty"`
	Done    string    `json:"done"`
	Handled []string  `json:"handled,omitempty"`
	Active  time.Time `json:"active"`
	// Edits is cursor.edits; absent in a document of an older version,
	// whose chats then have no edits caught up until their next save.
	Edits time.Time `json:"edits,omitzero"`
}

// cursors is safe for concurrent use.
type cursors struct {
	store CursorStore
	now   func() time.Time
	log   *zap.Logger

	wmu    sync.Mutex // serialises saves; taken before mu
	mu     sync.Mutex
	chats  map[string]*cursor
	dirty  bool
	direct bool // the writer stopped: acks write at once
	wake   chan struct{}
}

func newCursors(store CursorStore, now func() time.Time, log *zap.Logger) *cursors {
	return &cursors{store: store, now: now, log: log, chats: map[string]*cursor{}, wake: make(chan struct{}, 1)}
}

// load reads the saved document; every chat in it waits for a catch-up. A
// corrupt document is reported and set aside: the bot must still start.
func (cs *cursors) load(ctx context.Context) error {
	data, found, err := cs.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load discord cursors: %w", err)
	}
	if !found {
		return nil
	}
	var f cursorFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("discord cursors are corrupt (missed messages will not be fetched; they are rewritten): %w %v: %w",
			channels.ErrCorruptState, cs.store, err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for id, e := range f.Chats {
		done, err := strconv.ParseUint(e.Done, 10, 64)
		if err != nil || id == "" {
			cs.log.Warn("discord cursor ignored", zap.String("chat", id), zap.String("done", e.Done))
			continue
		}
		c := &cursor{guild: e.Guild, done: done, active: e.Active, edits: e.Edits, tracked: true, frozen: true, pending: map[uint64]struct{}{}}
		for _, h := range e.Handled {
			if v, err := strconv.ParseUint(h, 10, 64); err == nil && v > done {
				c.handled = append(c.handled, v)
			}
		}
		slices.Sort(c.handled)
		cs.chats[id] = c
	}
	return nil
}

// seen records a message about to be handled. It reports false when the
// message is already pending or handled (a gateway redelivery, or a
// catch-up finding what the live session delivered): the caller drops it.
func (cs *cursors) seen(chat string, id uint64, guild string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil {
		c = &cursor{guild: guild, pending: map[uint64]struct{}{}}
		cs.chats[chat] = c
	}
	if _, ok := c.pending[id]; ok || (c.done > 0 && id <= c.done) {
		return false
	}
	if _, ok := slices.BinarySearch(c.handled, id); ok {
		return false
	}
	c.pending[id] = struct{}{}
	return true
}

// track marks chat as one the bot answers in: it is kept on disk and
// caught up after a restart. A chat tracked for the first time starts just
// before its oldest message still pending; track then reports true, and
// the caller saves before the message goes on, so a crash cannot lose it.
func (cs *cursors) track(chat string, id uint64) (first bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil {
		return false
	}
	if !c.tracked {
		// An untracked chat keeps no handled list: everything before its
		// pending messages is settled.
		first = true
		low := id
		for p := range c.pending {
			low = min(low, p)
		}
		c.done = max(c.done, low-1)
		c.tracked = true
	}
	c.active = cs.now()
	cs.compact(c)
	cs.markDirty()
	return first
}

// ack records that a message was handled: answered, or dropped on purpose.
func (cs *cursors) ack(chat string, id uint64) {
	cs.mu.Lock()
	c := cs.chats[chat]
	if c == nil {
		cs.mu.Unlock()
		return
	}
	delete(c.pending, id)
	if !c.tracked {
		if len(c.pending) == 0 {
			delete(cs.chats, chat)
		}
		cs.mu.Unlock()
		return
	}
	if id > c.done {
		if i, ok := slices.BinarySearch(c.handled, id); !ok {
			c.handled = slices.Insert(c.handled, i, id)
		}
	}
	cs.compact(c)
	cs.markDirty()
	direct := cs.direct
	cs.mu.Unlock()
	if direct {
		// The writer has stopped (shutdown): write now, or the restart
		// would take this message up again.
		if err := cs.save(); err != nil {
			cs.log.Error("discord cursors not saved", zap.Error(err))
		}
	}
}

// compact moves done past the handled ids below every pending one. Callers
// hold mu.
func (cs *cursors) compact(c *cursor) {
	if !c.frozen {
		low := uint64(1<<64 - 1)
		for p := range c.pending {
			low = min(low, p)
		}
		n := 0
		for n < len(c.handled) && c.handled[n] < low {
			c.done = max(c.done, c.handled[n])
			n++
		}
		c.handled = c.handled[n:]
	}
	if over := len(c.handled) - maxHandled; over > 0 {
		c.handled = c.handled[over:]
	}
}

// freeze makes every tracked chat wait for a catch-up: a new gateway
// session began, and what was posted before it is unknown.
func (cs *cursors) freeze() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.chats {
		if c.tracked {
			c.frozen = true
		}
	}
}

// catchUpJob is a chat to fetch missed messages of, after id after, and
// missed edits of, made after edits (zero: none are taken up).
type catchUpJob struct {
	chat, guild string
	after       uint64
	edits       time.Time
}

// due lists the chats waiting for a catch-up, most recently active first,
// forgetting those idle for longer than forgetAfter.
func (cs *cursors) due() []catchUpJob {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.prune()
	var jobs []catchUpJob
	for id, c := range cs.chats {
		if c.frozen {
			jobs = append(jobs, catchUpJob{chat: id, guild: c.guild, after: c.done, edits: c.edits})
		}
	}
	slices.SortFunc(jobs, func(a, b catchUpJob) int { return cs.chats[b.chat].active.Compare(cs.chats[a.chat].active) })
	return jobs
}

// hold keeps fn, the handling of a live message, for after chat's
// catch-up when one is due, and reports whether it did.
func (cs *cursors) hold(chat string, fn func()) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil || !c.frozen {
		return false
	}
	c.held = append(c.held, fn)
	return true
}

// release ends chat's catch-up: done may move again. It returns the live
// messages held meanwhile, for the caller to handle in order.
func (cs *cursors) release(chat string) []func() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil {
		return nil
	}
	held := c.held
	c.frozen, c.held = false, nil
	cs.compact(c)
	cs.markDirty()
	return held
}

// forget drops a chat the bot can no longer read (deleted, or access
// lost), returning its held live messages as release does.
func (cs *cursors) forget(chat string) []func() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil {
		return nil
	}
	delete(cs.chats, chat)
	cs.markDirty()
	return c.held
}

// prune drops tracked chats idle longer than forgetAfter with nothing
// pending, and the least recently active beyond maxTracked. Callers hold mu.
func (cs *cursors) prune() {
	cutoff := cs.now().Add(-forgetAfter)
	var idle []string
	for id, c := range cs.chats {
		if !c.tracked {
			continue
		}
		if c.idle() && c.active.Before(cutoff) {
			delete(cs.chats, id)
			cs.dirty = true
			continue
		}
		idle = append(idle, id)
	}
	if len(idle) <= maxTracked {
		return
	}
	slices.SortFunc(idle, func(a, b string) int { return cs.chats[b].active.Compare(cs.chats[a].active) })
	for _, id := range idle[maxTracked:] {
		if cs.chats[id].idle() {
			delete(cs.chats, id)
			cs.dirty = true
		}
	}
}

// idle reports whether nothing of the chat is in hand: no message pending
// and none held for after its catch-up.
func (c *cursor) idle() bool { return len(c.pending) == 0 && len(c.held) == 0 }

// markDirty asks the writer to save. Callers hold mu.
func (cs *cursors) markDirty() {
	cs.dirty = true
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// writer saves the file whenever it changed, until ctx ends; from then on
// acks save at once.
func (cs *cursors) writer(ctx context.Context) {
	for {
		select {
		case <-cs.wake:
			if err := cs.save(); err != nil {
				cs.log.Error("discord cursors not saved", zap.Error(err))
			}
		case <-ctx.Done():
			cs.mu.Lock()
			cs.direct = true
			cs.mu.Unlock()
			if err := cs.save(); err != nil {
				cs.log.Error("discord cursors not saved", zap.Error(err))
			}
			return
		}
	}
}

// save writes the tracked chats if anything changed.
func (cs *cursors) save() error {
	cs.wmu.Lock()
	defer cs.wmu.Unlock()
	cs.mu.Lock()
	if !cs.dirty {
		cs.mu.Unlock()
		return nil
	}
	cs.prune()
	f := cursorFile{Version: 1, Chats: map[string]cursorFileEntry{}}
	for id, c := range cs.chats {
		if !c.tracked {
			continue
		}
		if !c.frozen {
			// Live: every edit until now reached the gateway handler.
			c.edits = maxTime(c.edits, cs.now())
		}
		e := cursorFileEntry{Guild: c.guild, Done: strconv.FormatUint(c.done, 10), Active: c.active, Edits: c.edits}
		for _, h := range c.handled {
			e.Handled = append(e.Handled, strconv.FormatUint(h, 10))
		}
		f.Chats[id] = e
	}
	cs.dirty = false
	cs.mu.Unlock()
	data, err := json.Marshal(f)
	if err == nil {
		// Not the caller's context: a save that began must not be cut
		// short by shutdown, only bounded.
		ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
		err = cs.store.Save(ctx, data)
		cancel()
	}
	if err != nil {
		cs.mu.Lock()
		cs.dirty = true // try again at the next change
		cs.mu.Unlock()
		return fmt.Errorf("save discord cursors %v: %w", cs.store, err)
	}
	return nil
}

// edited records that an edit of chat made at t was handled, so a
// catch-up does not take it up again.
func (cs *cursors) edited(chat string, t time.Time) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil || !c.tracked || !t.After(c.edits) {
		return
	}
	c.edits = t
	cs.markDirty()
}

// settled reports whether the message id of chat was handled before: a
// catch-up finding it edited takes the edit as a correction.
func (cs *cursors) settled(chat string, id uint64) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chats[chat]
	if c == nil {
		return false
	}
	if id <= c.done {
		return true
	}
	_, ok := slices.BinarySearch(c.handled, id)
	return ok
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// discordEpoch is the start of Discord's snowflake clock (2015-01-01 UTC).
const discordEpoch = 1420070400000

// snowflakeAt is the smallest id Discord could give a message posted at t.
func snowflakeAt(t time.Time) uint64 {
	ms := t.UnixMilli() - discordEpoch
	if ms <= 0 {
		return 0
	}
	return uint64(ms) << 22
}
