package telegram

import (
	"context"
	"errors"
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
func (c *Channel) handle(parts []*models.Update) {
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
	a := c.arrival(first, me)
	a.Msg.Ack = ack
	var msgs []*models.Message
	for _, u := range parts {
		msgs = append(msgs, u.Message)
	}
	var texts []string
	for _, m := range msgs {
		if t := messageText(m, me); t != "" {
			texts = append(texts, t)
		}
	}
	a.Msg.Content = strings.Join(texts, "\n\n")
	a.Prepare = func(ctx context.Context, in *bus.InboundMessage) error {
		return c.prepareMedia(ctx, msgs, in)
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
		SenderName: senderName(m.From),
		ChatID:     chat,
		MessageID:  strconv.Itoa(m.ID),
		Metadata:   meta,
		Time:       time.Unix(int64(m.Date), 0).UTC(),
	}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		thread := strconv.Itoa(m.MessageThreadID)
		meta[MetaThreadID] = thread
		in.SessionKey = Name + ":" + chat + ":topic:" + thread
	}
	return channels.Arrival{Msg: in, Username: m.From.Username, Group: group, Addressed: !group || addressed(m, me)}
}

func senderName(u *models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
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
// as separate updates, and hands them over together after wait.
type albums struct {
	wait time.Duration
	done func([]*models.Update)

	mu     sync.Mutex
	groups map[string]*album
	wg     sync.WaitGroup // timers armed and not yet finished
}

type album struct {
	parts []*models.Update
	timer *time.Timer
}

func newAlbums(wait time.Duration, done func([]*models.Update)) *albums {
	return &albums{wait: wait, done: done, groups: map[string]*album{}}
}

func (a *albums) add(u *models.Update) {
	key := strconv.FormatInt(u.Message.Chat.ID, 10) + "/" + u.Message.MediaGroupID
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[key]
	if g == nil {
		g = &album{}
		a.groups[key] = g
		a.wg.Add(1)
		g.timer = time.AfterFunc(a.wait, func() {
			defer a.wg.Done()
			a.fire(key)
		})
	}
	g.parts = append(g.parts, u)
}

func (a *albums) fire(key string) {
	a.mu.Lock()
	g := a.groups[key]
	delete(a.groups, key)
	a.mu.Unlock()
	if g != nil {
		a.done(g.parts)
	}
}

// flush hands over every album still collecting and waits for timers that
// already fired, so no timer goroutine outlives it.
func (a *albums) flush() {
	a.mu.Lock()
	groups := a.groups
	a.groups = map[string]*album{}
	a.mu.Unlock()
	for _, g := range groups {
		if g.timer.Stop() {
			a.wg.Done()
			a.done(g.parts)
		}
	}
	a.wg.Wait()
}

// errNothing drops a message with nothing the agent could use.
var errNothing = errors.New("message has no text or usable attachment")
