package discord

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// CursorFile is the file in Deps.DataDir that keeps the chats' cursors.
const CursorFile = "discord-cursors.json"

const (
	// catchUpPage is Discord's largest page of channel messages.
	catchUpPage = 100
	// catchUpPages bounds what one chat's catch-up fetches (500 messages);
	// the oldest are taken first, so a longer backlog loses its newest.
	catchUpPages = 5
	// catchUpTries is how often a chat's fetch is tried before it is given
	// up until the next session.
	catchUpTries = 3
	// catchUpGap paces the fetches (20 a second at most), well under
	// Discord's global limit of 50 requests a second, which the replies
	// going out at the same time share.
	catchUpGap = 50 * time.Millisecond
)

// catchUpLoop runs a catch-up each time a new gateway session asks for
// one (onReady), until ctx ends.
func (c *Channel) catchUpLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.catchUpDue:
			c.catchUp(ctx)
		}
	}
}

// catchUp fetches, for every chat waiting for one, the messages posted
// after its cursor (and within the catch_up window) and hands those not
// seen yet to the same path as live messages, oldest first.
func (c *Channel) catchUp(ctx context.Context) {
	for i, job := range c.cursors.due() {
		if i > 0 && clock.Sleep(ctx, c.deps.Clock, catchUpGap) != nil {
			return
		}
		var err error
		var n int
		for try := range catchUpTries {
			if try > 0 && clock.Sleep(ctx, c.deps.Clock, time.Duration(1<<try)*time.Second) != nil {
				return
			}
			if n, err = c.catchUpChat(ctx, job); err == nil || gone(err) || ctx.Err() != nil {
				break
			}
		}
		log := c.log.With(zap.String("chat", job.chat))
		switch {
		case ctx.Err() != nil:
			return // the chat stays due: the next start fetches it
		case gone(err):
			log.Warn("chat no longer readable; not catching it up any more", zap.Error(err))
			run(c.cursors.forget(job.chat))
			continue
		case err != nil:
			log.Warn("missed messages not fetched; some may stay unanswered", zap.Error(err))
		case n > 0:
			log.Info("caught up with messages posted while disconnected", zap.Int("messages", n))
		}
		run(c.cursors.release(job.chat))
	}
}

// run handles held live messages, in the order they arrived.
func run(held []func()) {
	for _, fn := range held {
		fn()
	}
}

// catchUpChat fetches one chat's missed messages and edits and queues them,
// in the order they were made; it returns how many it queued.
//
// A message posted while the bot was away is taken as it reads now (an edit
// of it made meanwhile is just its text). An edit made while the bot was
// away of a message it had handled — one at or before the cursor, in the
// newest page up to it, or one handled after it — with an edited_timestamp
// after the chat's last seen edit (job.edits) becomes a correction, as a
// live MESSAGE_UPDATE does (docs/channels.md#edited-messages).
func (c *Channel) catchUpChat(ctx context.Context, job catchUpJob) (int, error) {
	since := c.deps.Clock.Now().Add(-c.cfg.CatchUp)
	after := max(job.after, snowflakeAt(since))
	editsAfter := maxTime(job.edits, since)
	var todo []missed
	add := func(m *discordgo.Message) {
		// Messages over REST carry no guild.
		m.ChannelID = cmp.Or(m.ChannelID, job.chat)
		m.GuildID = cmp.Or(m.GuildID, job.guild)
		id, err := strconv.ParseUint(m.ID, 10, 64)
		if err != nil || !fromHuman(m, c.state.bot()) {
			return
		}
		switch {
		case m.EditedTimestamp == nil:
		case !job.edits.IsZero() && m.EditedTimestamp.After(editsAfter) && c.cursors.settled(job.chat, id):
			todo = append(todo, missed{at: *m.EditedTimestamp, id: id, m: m, edit: true})
			return
		case c.cursors.settled(job.chat, id):
			return // an edit seen before, or older than the window
		default:
			m.EditedTimestamp = nil // never seen: its text now is the message
		}
		if id > job.after {
			todo = append(todo, missed{at: m.Timestamp, id: id, m: m})
		}
	}
	if !job.edits.IsZero() && job.after > 0 {
		page, err := c.sess.ChannelMessages(job.chat, catchUpPage, strconv.FormatUint(job.after+1, 10), "", "", discordgo.WithContext(ctx))
		if err != nil {
			return 0, err
		}
		for _, m := range page {
			if m != nil {
				add(m)
			}
		}
		if err := clock.Sleep(ctx, c.deps.Clock, catchUpGap); err != nil {
			return 0, err
		}
	}
	for range catchUpPages {
		page, err := c.sess.ChannelMessages(job.chat, catchUpPage, "", strconv.FormatUint(after, 10), "", discordgo.WithContext(ctx))
		if err != nil {
			return 0, err
		}
		for _, m := range page {
			if m == nil {
				continue
			}
			if id, err := strconv.ParseUint(m.ID, 10, 64); err == nil {
				after = max(after, id)
				add(m)
			}
		}
		if len(page) < catchUpPage {
			break
		}
	}
	// In the order they were made: a message by its id, an edit by its
	// time, so a correction lands between the messages around it.
	slices.SortStableFunc(todo, func(a, b missed) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	// Handed over as one backlog: each but the last is marked as followed
	// by more, so the agent answers them together
	// (bus.InboundMessage.More), the resumed turn of a crash included.
	queued := 0
	var prev *discordgo.Message
	flush := func(more bool) {
		if prev != nil && c.queue(prev, more) {
			queued++
		}
		prev = nil
	}
	for _, f := range todo {
		m := f.m
		if !c.taking() {
			break // stopping: what is not queued stays after the cursor
		}
		if !f.edit && !c.fresh(m) {
			continue
		}
		// The gates need the author's membership, which REST leaves out.
		if m.GuildID != "" && m.Member == nil && len(c.cfg.AllowRoles) > 0 && m.Author != nil {
			if member, err := c.sess.GuildMember(m.GuildID, m.Author.ID, discordgo.WithContext(ctx)); err == nil {
				m.Member = member
			}
		}
		flush(true)
		prev = m
	}
	flush(false)
	return queued, nil
}

// missed is a message or an edit a catch-up found.
type missed struct {
	at   time.Time
	id   uint64
	m    *discordgo.Message
	edit bool
}

// gone reports an error that will not pass: the channel was deleted or the
// bot may no longer read it.
func gone(err error) bool {
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response == nil {
		return false
	}
	switch re.Response.StatusCode {
	case http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}
