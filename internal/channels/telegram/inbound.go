package telegram

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// Metadata keys the Telegram channel puts on inbound messages; the agent
// echoes them back on replies.
const (
	MetaThreadID = "message_thread_id"
	MetaChatType = "chat_type"
)

// handle turns one message (or an album's messages) into an arrival and runs
// it through the intake. It runs on the chat's lane.
func (c *Channel) handle(parts []*models.Update, more bool) {
	ctx := c.handCtx
	ids := make([]int64, len(parts))
	for i, u := range parts {
		ids[i] = u.ID
	}
	ack := func() {
		for _, id := range ids {
			c.journal.ack(id) // a failed late write is logged by the journal
		}
	}
	first := parts[0].Message
	me := c.me.Load()
	if first.From == nil || first.From.IsBot || first.SenderChat != nil {
		ack() // channel posts, anonymous admins, other bots, ourselves
		return
	}
	var msgs []*models.Message
	for _, u := range parts {
		msgs = append(msgs, u.Message)
	}
	a := c.arrival(first, me)
	a.Msg.Ack = ack
	a.Msg.More = more
	a.Said = said(msgs, me, first.EditDate != 0)
	if a.Said.Text == "" && len(a.Said.Items) == 0 && a.Said.Reply == nil && !hasMedia(msgs) && isService(first) {
		ack() // a member joined, a title changed: nobody said anything
		return
	}
	if first.EditDate != 0 {
		// An edit is a message of its own (docs/channels.md#edited-messages):
		// its own id, its own time, nothing fetched again.
		a.Msg.MessageID = channels.EditID(a.Msg.MessageID, strconv.FormatInt(parts[0].ID, 10))
		a.Msg.Time = unix(first.EditDate)
	} else {
		a.Prepare = func(ctx context.Context, in *bus.InboundMessage) error {
			return c.prepareMedia(ctx, msgs, in)
		}
	}
	if _, err := c.intake.Admit(ctx, a); err != nil {
		// The bus refused (shutting down): leave the update unacknowledged
		// so it is replayed after the restart.
		c.log.Info("inbound message left for replay", zap.Int64("update", ids[0]), zap.Error(err))
	}
}

// arrival fills in who, where and whether a group message addressed the bot.
func (c *Channel) arrival(m *models.Message, me *models.User) channels.Arrival {
	chat := strconv.FormatInt(m.Chat.ID, 10)
	group := m.Chat.Type != models.ChatTypePrivate
	meta := map[string]string{MetaChatType: string(m.Chat.Type)}
	in := bus.InboundMessage{
		Channel:    Name,
		SenderID:   strconv.FormatInt(m.From.ID, 10),
		SenderName: displayName(m.From),
		ChatID:     chat,
		MessageID:  strconv.Itoa(m.ID),
		Metadata:   meta,
		Time:       time.Unix(int64(m.Date), 0).UTC(),
	}
	if thread := topic(m); thread != "" {
		meta[MetaThreadID] = thread
		in.SessionKey = SessionKey(channels.Chat{ID: chat, Metadata: meta})
	}
	return channels.Arrival{Msg: in, Username: m.From.Username, Group: group, Addressed: !group || addressed(m, me)}
}

// topic is the forum topic m was posted in, "" outside one.
func topic(m *models.Message) string {
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		return strconv.Itoa(m.MessageThreadID)
	}
	return ""
}

// hasMedia reports whether one of msgs carries what Prepare fetches.
func hasMedia(msgs []*models.Message) bool {
	for _, m := range msgs {
		if thumb, _ := thumbnail(m); thumb != nil || len(m.Photo) > 0 || m.Document != nil || m.Voice != nil || m.Audio != nil {
			return true
		}
	}
	return false
}

// addressed reports whether a group message is for the bot: it mentions the
// bot, replies to one of its messages, or is a command (Telegram only
// delivers bare commands in groups to bots they may be meant for).
func addressed(m *models.Message, me *models.User) bool {
	if me == nil {
		return false
	}
	if r := m.ReplyToMessage; r != nil && r.From != nil && r.From.ID == me.ID {
		return true
	}
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	for _, e := range ents {
		switch e.Type {
		case models.MessageEntityTypeMention:
			if strings.EqualFold(entityText(text, e), "@"+me.Username) {
				return true
			}
		case models.MessageEntityTypeTextMention:
			if e.User != nil && e.User.ID == me.ID {
				return true
			}
		case models.MessageEntityTypeBotCommand:
			if e.Offset == 0 {
				cmd := entityText(text, e)
				_, target, ok := strings.Cut(cmd, "@")
				return !ok || strings.EqualFold(target, me.Username)
			}
		}
	}
	return false
}

// entityText cuts an entity out of text; offsets count UTF-16 units.
func entityText(text string, e models.MessageEntity) string {
	u := utf16.Encode([]rune(text))
	if e.Offset < 0 || e.Length < 0 || e.Offset+e.Length > len(u) {
		return ""
	}
	return string(utf16.Decode(u[e.Offset : e.Offset+e.Length]))
}

// messageText is the text or caption with the bot's own @mention removed
// and a command's @botname suffix stripped, so "/new@my_bot" reads "/new".
func messageText(m *models.Message, me *models.User) string {
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	if me == nil || me.Username == "" {
		return strings.TrimSpace(text)
	}
	mention := "@" + me.Username
	if f := strings.Fields(text); len(f) > 0 && strings.HasPrefix(f[0], "/") {
		if cmd, target, ok := strings.Cut(f[0], "@"); ok && strings.EqualFold(target, me.Username) {
			text = cmd + strings.TrimPrefix(text, f[0])
		}
	}
	text = replaceFold(text, " "+mention, "")
	text = replaceFold(text, mention, "")
	return strings.TrimSpace(text)
}

// replaceFold replaces old in s ignoring case (usernames are case-insensitive).
func replaceFold(s, old, repl string) string {
	lower, lo := strings.ToLower(s), strings.ToLower(old)
	var b strings.Builder
	for {
		i := strings.Index(lower, lo)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lower = s[i+len(old):], lower[i+len(lo):]
	}
}

// albums collects the messages of one media group, which Telegram delivers
// as separate updates, and hands them over together after wait. The first
// part takes the chat's place in line at once (the caller queues the
// album's handler on the chat's lane, where it waits for the rest), so a
// message sent after the album is not answered before it.
type albums struct {
	wait time.Duration

	mu     sync.Mutex
	groups map[string]*album
	wg     sync.WaitGroup // timers armed and not yet finished
}

type album struct {
	parts []*models.Update
	timer *time.Timer
	ready chan struct{} // closed once the parts are collected
}

// collected waits until the album is complete and returns its parts.
func (g *album) collected() []*models.Update {
	<-g.ready
	return g.parts
}

func newAlbums(wait time.Duration) *albums {
	return &albums{wait: wait, groups: map[string]*album{}}
}

// add files u under its album; for an album's first part it returns the
// album, whose handler the caller queues on the chat's lane.
func (a *albums) add(u *models.Update) (first *album) {
	key := strconv.FormatInt(u.Message.Chat.ID, 10) + "/" + u.Message.MediaGroupID
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[key]
	if g == nil {
		g = &album{ready: make(chan struct{})}
		first = g
		a.groups[key] = g
		a.wg.Add(1)
		g.timer = time.AfterFunc(a.wait, func() {
			defer a.wg.Done()
			a.fire(key)
		})
	}
	g.parts = append(g.parts, u)
	return first
}

func (a *albums) fire(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.groups[key]; g != nil {
		delete(a.groups, key)
		close(g.ready)
	}
}

// flush completes every album still collecting and waits for timers that
// already fired, so no timer goroutine outlives it.
func (a *albums) flush() {
	a.mu.Lock()
	groups := a.groups
	a.groups = map[string]*album{}
	for _, g := range groups {
		if g.timer.Stop() {
			a.wg.Done()
		}
		close(g.ready)
	}
	a.mu.Unlock()
	a.wg.Wait()
}
