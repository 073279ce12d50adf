package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// syncTimeout is how long one /sync long poll waits for something new.
const syncTimeout = 30 * time.Second

// timelineLimit is how many events per room one sync returns; more came
// while the bot was away (a "limited" timeline) are fetched with /messages
// (fillGap), up to gapPages pages of it.
const (
	timelineLimit = 50
	gapPages      = 10
)

// syncFilter asks for what the bot reads and nothing else: no presence, no
// account data, no ephemeral events (typing, receipts) of others.
func syncFilter(limit int) string {
	f := mautrix.Filter{
		Presence:    &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
		AccountData: &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
		Room: &mautrix.RoomFilter{
			Ephemeral:   &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
			AccountData: &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
			Timeline:    &mautrix.FilterPart{Limit: limit},
		},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// syncLoop long-polls /sync until ctx ends. Each batch is handled whole
// before its next_batch is kept, so a stop or crash never skips an event.
// The first sync of a bot without a saved position only takes the
// position (and the invites): history from before the bot was set up is
// not answered.
func (c *Channel) syncLoop(ctx context.Context, lanes *channels.Lanes) error {
	filter := syncFilter(c.timelineLimit)
	var batch *mautrix.RespSync
	resumed := false
	for {
		since := c.state.since()
		err := c.retry(ctx, "sync", func() error {
			timeout := int(syncTimeout.Milliseconds())
			if since == "" || c.Healthy() != nil {
				timeout = 0 // answer at once: the first sync, or back from a failure
			}
			var err error
			batch, err = c.cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: timeout, Since: since, FilterID: filter})
			if err != nil {
				return classify("sync", err)
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if c.Healthy() != nil {
			c.log.Info("matrix sync connected", zap.String("user", string(c.bot)))
		}
		c.setHealth(nil)
		var held map[id.RoomID][]*event.Event
		if !resumed {
			// The homeserver answers: first what an earlier run handed
			// over and never answered, in each room ahead of the new.
			held, resumed = c.resume(ctx), true
		}
		if !c.handleBatch(ctx, lanes, since, batch, held) {
			return nil // stopped mid-batch: what was handled is in the state
		}
		c.state.advance(batch.NextBatch)
		if err := c.state.save(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("matrix sync position not saved; a crash now repeats this batch", zap.Error(err))
		}
	}
}

// handleBatch handles one sync response: invites, membership changes and
// room messages, each room's in order and rooms in parallel. resumed are
// the messages an earlier run left unanswered (resume), per room: they go
// first, and with what the batch brings for their room they are one
// backlog (bus.InboundMessage.More), so the cut turn takes in what was
// sent meanwhile. It reports whether every event was handled (false when
// ctx ended first).
func (c *Channel) handleBatch(ctx context.Context, lanes *channels.Lanes, since string, b *mautrix.RespSync, resumed map[id.RoomID][]*event.Event) bool {
	for room, inv := range b.Rooms.Invite {
		c.invited(ctx, room, inv)
	}
	for room := range b.Rooms.Leave {
		c.forgetRoom(room)
		c.state.forget(room.String())
	}
	if since == "" {
		return true // first start: take the position only
	}
	var wg sync.WaitGroup
	complete := true
	// dispatch queues a room's events on its lane; the resumed ones are
	// not marked handled (they belong to no batch).
	dispatch := func(room id.RoomID, items []queued) {
		more := -1 // the last message of a backlog: the others are marked
		if len(resumed[room]) > 0 {
			for i, it := range items {
				if c.isMessage(it.evt) {
					more = i
				}
			}
		}
		for i, it := range items {
			wg.Add(1)
			err := lanes.Go(ctx, room.String(), func() {
				defer wg.Done()
				if c.handleEvent(ctx, it.evt, i < more && c.isMessage(it.evt)) && !it.resumed {
					c.state.markHandled(room.String(), it.evt.ID.String())
				}
			})
			if err != nil {
				wg.Done()
				complete = false
				return
			}
		}
	}
	for room, jr := range b.Rooms.Join {
		for _, evt := range jr.State.Events {
			c.membership(room, evt)
		}
		events := jr.Timeline.Events
		if i := c.joinedAt(events); i >= 0 {
			// Joined in this batch: what was said before the bot came in
			// is not for it, and there is no gap to fill.
			events = events[i+1:]
		} else if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			events = append(c.fillGap(ctx, room, jr.Timeline.PrevBatch, since), events...)
		}
		var items []queued
		for _, evt := range resumed[room] {
			items = append(items, queued{evt: evt, resumed: true})
		}
		for _, evt := range events {
			evt.RoomID = room
			if c.membership(room, evt) || evt.StateKey != nil || c.state.handled(evt.ID.String()) {
				continue
			}
			items = append(items, queued{evt: evt})
		}
		dispatch(room, items)
	}
	for room, evts := range resumed {
		if _, ok := b.Rooms.Join[room]; ok {
			continue
		}
		items := make([]queued, 0, len(evts))
		for _, evt := range evts {
			items = append(items, queued{evt: evt, resumed: true})
		}
		dispatch(room, items)
	}
	wg.Wait()
	return complete && ctx.Err() == nil
}

// queued is an event for a room's lane.
type queued struct {
	evt *event.Event
	// resumed: handed over before, by an earlier run (resume).
	resumed bool
}

// isMessage reports whether evt is a message from someone else, the kind
// handleEvent hands to the agent. Types are compared by name: the class the
// JSON leaves unset does not matter.
func (c *Channel) isMessage(evt *event.Event) bool {
	return evt.Sender != c.bot && (evt.Type.Type == event.EventMessage.Type || evt.Type.Type == event.EventSticker.Type)
}

// resume fetches the messages an earlier run handed over and never saw
// answered (a crash or a stop mid-turn), per room and oldest first, for
// handleBatch to hand over again: the agent finds each in its session and
// finishes the turn, or sends the answer it saved, instead of answering
// twice (internal/agent/replay.go). A message the homeserver no longer
// gives out (redacted, the room left) is dropped with a log line; one that
// fails otherwise is kept for the next start.
func (c *Channel) resume(ctx context.Context) map[id.RoomID][]*event.Event {
	held := c.state.unanswered()
	if len(held) == 0 {
		return nil
	}
	out := map[id.RoomID][]*event.Event{}
	n := 0
	for _, h := range held {
		evt, err := c.cli.GetEvent(ctx, id.RoomID(h.Room), id.EventID(h.Event))
		if err != nil {
			err = classify("fetch an unanswered message", err)
			if ctx.Err() != nil {
				return nil
			}
			if perm := (*channels.PermanentError)(nil); errors.As(err, &perm) {
				c.log.Warn("unanswered message no longer readable; not handing it over again",
					zap.String("room", h.Room), zap.String("event", h.Event), zap.Error(err))
				c.state.answered(h.Event)
				continue
			}
			c.log.Warn("unanswered message not fetched; trying again at the next start",
				zap.String("room", h.Room), zap.String("event", h.Event), zap.Error(err))
			continue
		}
		evt.RoomID = id.RoomID(h.Room)
		out[evt.RoomID] = append(out[evt.RoomID], evt)
		n++
	}
	if n > 0 {
		c.log.Info("handing over again the messages a restart left unanswered", zap.Int("messages", n))
	}
	return out
}

// joinedAt is the index of the bot's own join in a timeline, or -1.
func (c *Channel) joinedAt(events []*event.Event) int {
	for i := len(events) - 1; i >= 0; i-- {
		evt := events[i]
		if evt.Type.Type != event.StateMember.Type || evt.StateKey == nil || id.UserID(*evt.StateKey) != c.bot {
			continue
		}
		var m event.MemberEventContent
		if json.Unmarshal(evt.Content.VeryRaw, &m) == nil && m.Membership == event.MembershipJoin {
			return i
		}
	}
	return -1
}

// membership keeps the room cache up to date from a member event and
// reports whether evt was one.
func (c *Channel) membership(room id.RoomID, evt *event.Event) bool {
	if evt.Type.Type != event.StateMember.Type || evt.StateKey == nil {
		return false
	}
	if err := evt.Content.ParseRaw(event.StateMember); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		return true
	}
	m := evt.Content.AsMember()
	user := id.UserID(*evt.StateKey)
	c.member(room, user, m.Membership == event.MembershipJoin, m.Displayname)
	return true
}

// fillGap fetches the events a limited timeline left out: backwards from
// the timeline's start until the last event handled in the room (or the
// bot's join, or where the last sync ended), oldest first. The stop at a
// known event does not trust the server to honour "to" exactly.
func (c *Channel) fillGap(ctx context.Context, room id.RoomID, from, to string) []*event.Event {
	last := id.EventID(c.state.last(room.String()))
	var missed []*event.Event
	done := false
	for page := 0; page < gapPages && from != "" && !done; page++ {
		resp, err := c.cli.Messages(ctx, room, from, to, mautrix.DirectionBackward, nil, 100)
		if err != nil {
			c.log.Warn("matrix: missed messages not fetched", zap.String("room", room.String()), zap.Error(err))
			break
		}
		for _, evt := range resp.Chunk {
			if evt.ID == last || c.joinedAt([]*event.Event{evt}) == 0 {
				done = true
				break
			}
			missed = append(missed, evt)
		}
		if len(resp.Chunk) == 0 || resp.End == "" || resp.End == from {
			break
		}
		from = resp.End
	}
	slices.Reverse(missed)
	if len(missed) > 0 {
		c.log.Info("matrix: fetched messages the sync left out", zap.String("room", room.String()), zap.Int("events", len(missed)))
	}
	return missed
}

// invited joins a room the bot was invited to by an allowed user; other
// invites are declined. Under policy pairing a direct invite from anyone is
// joined, so a stranger can ask for a pairing code.
func (c *Channel) invited(ctx context.Context, room id.RoomID, inv *mautrix.SyncInvitedRoom) {
	var inviter id.UserID
	direct := false
	for _, evt := range inv.State.Events {
		if evt.Type.Type != event.StateMember.Type || evt.StateKey == nil || id.UserID(*evt.StateKey) != c.bot {
			continue
		}
		_ = evt.Content.ParseRaw(event.StateMember)
		if m := evt.Content.AsMember(); m.Membership == event.MembershipInvite {
			inviter, direct = evt.Sender, m.IsDirect
		}
	}
	if inviter == "" {
		return
	}
	log := c.log.With(zap.String("room", room.String()), zap.String("inviter", inviter.String()))
	ok, err := c.access.Allowed(sender(inviter))
	if err != nil {
		log.Error("access check failed; invite declined", zap.Error(err))
	}
	if !ok && !(direct && c.access.Policy() == channels.PolicyPairing) {
		log.Info("invite from a user who is not allowed declined")
		if _, err := c.cli.LeaveRoom(ctx, room); err != nil {
			log.Warn("invite not declined", zap.Error(err))
		}
		return
	}
	if _, err := c.cli.JoinRoomByID(ctx, room); err != nil {
		log.Warn("invite not accepted", zap.Error(err))
		return
	}
	if direct {
		c.markDirect(room)
	}
	log.Info("joined a room on invite")
}
