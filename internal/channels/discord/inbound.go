package discord

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// onMessageCreate runs on discordgo's gateway reader (SyncEvents).
func (c *Channel) onMessageCreate(_ *discordgo.Session, e *discordgo.MessageCreate) {
	m := e.Message
	if m == nil {
		return
	}
	// In a chat waiting for its catch-up, older messages are still to be
	// fetched: this one is handled after them.
	if c.cursors != nil && c.cursors.hold(m.ChannelID, func() { c.receive(m) }) {
		return
	}
	c.receive(m)
}

// onMessageUpdate runs on discordgo's gateway reader for MESSAGE_UPDATE.
// Only an edit the author made (edited_timestamp set) is a message; Discord
// also sends updates that merely add link previews. An edit goes to the
// chat's lane behind what it already holds; in a chat waiting for its
// catch-up, after what that finds. Edits made while the bot was away are
// caught up (catchUpChat; docs/channels.md#edited-messages).
func (c *Channel) onMessageUpdate(_ *discordgo.Session, e *discordgo.MessageUpdate) {
	m := e.Message
	if m == nil || m.EditedTimestamp == nil || !fromHuman(m, c.state.bot()) {
		return
	}
	if c.cursors != nil && c.cursors.hold(m.ChannelID, func() { c.queueEdit(m) }) {
		return
	}
	c.queueEdit(m)
}

// queueEdit queues an edit on its chat's lane; it reports whether it did.
func (c *Channel) queueEdit(m *discordgo.Message) bool { return c.queue(m, false) }

// receive queues a live or caught-up message on its chat's lane, waiting
// while too many are pending, so a chat's messages keep their order and
// memory stays bounded. It reports whether the message was queued: not when
// it is not from a human, was seen before, or the channel is stopping (it
// then stays pending, and the next start fetches it again).
func (c *Channel) receive(m *discordgo.Message) bool {
	return c.taking() && c.fresh(m) && c.queue(m, false)
}

// taking reports whether the channel takes messages: one taken before or
// after it does must not be marked seen, so that a catch-up fetches it.
func (c *Channel) taking() bool { return c.runCtx.Load() != nil && c.lanes.Load() != nil }

// fresh reports whether m is a human's message not handled before; it
// marks it seen.
func (c *Channel) fresh(m *discordgo.Message) bool {
	if !fromHuman(m, c.state.bot()) {
		return false
	}
	if c.cursors != nil {
		if id, err := strconv.ParseUint(m.ID, 10, 64); err == nil && !c.cursors.seen(m.ChannelID, id, m.GuildID) {
			c.log.Debug("message already handled", zap.String("message", m.ID))
			return false
		}
	}
	return true
}

// queue puts m (a message or an edit) on its chat's lane; more marks it as
// followed at once by another of the chat's (bus.InboundMessage.More). It
// reports whether m was queued.
func (c *Channel) queue(m *discordgo.Message, more bool) bool {
	ctxp, lanes := c.runCtx.Load(), c.lanes.Load()
	if ctxp == nil || lanes == nil {
		return false
	}
	ctx := *ctxp
	if err := lanes.Go(ctx, m.ChannelID, func() { c.handle(ctx, m, more) }); err != nil {
		c.log.Info("inbound message not handled: shutting down", zap.String("message", m.ID), zap.Bool("edit", m.EditedTimestamp != nil))
		return false
	}
	return true
}

// handle turns a message into an Arrival for the intake, which applies the
// access policy, dedupe, rate limits and /whoami. Attachments are fetched
// only in Prepare, after the gate: a sender who is not allowed costs
// nothing but this check.
func (c *Channel) handle(ctx context.Context, m *discordgo.Message, more bool) {
	bot := c.state.bot()
	edit := m.EditedTimestamp != nil
	in := bus.InboundMessage{
		Channel:    Name,
		SenderID:   m.Author.ID,
		SenderName: displayName(m.Author, m.Member),
		ChatID:     m.ChannelID,
		MessageID:  m.ID,
		Content:    m.Content,
		Time:       m.Timestamp,
		Metadata:   map[string]string{"is_group": "false"},
		More:       more,
	}
	if edit {
		// An edit is a message of its own (docs/channels.md#edited-messages):
		// its own id and time; not tracked by the cursors, which count
		// messages, not versions.
		in.MessageID = channels.EditID(m.ID, strconv.FormatInt(m.EditedTimestamp.UnixMilli(), 10))
		in.Time = *m.EditedTimestamp
		if c.cursors != nil {
			c.cursors.edited(m.ChannelID, *m.EditedTimestamp)
		}
	}
	a := channels.Arrival{Msg: in, Username: m.Author.Username}
	id, err := strconv.ParseUint(m.ID, 10, 64)
	if c.cursors != nil && err == nil && !edit {
		a.Msg.Ack = func() { c.cursors.ack(m.ChannelID, id) }
	}
	if m.GuildID != "" {
		if !c.guildGate(ctx, m.GuildID, m.ChannelID, m.Author.ID, m.Member, &a) {
			if a.Msg.Ack != nil {
				a.Msg.Ack()
			}
			return
		}
		var roles []string
		a.Addressed, roles = c.addressed(ctx, m, bot)
		a.Msg.Content = stripBotMention(m.Content, bot, roles)
	}
	if a.Msg.Ack != nil && (m.GuildID == "" || a.Addressed || c.cfg.GroupPolicy == channels.GroupOpen) && c.allowed(m.Author) {
		// A chat the bot answers in: caught up after a restart. Marked
		// before the agent can acknowledge the message, and a new chat is
		// on disk before its first message is. Strangers' chats are not
		// tracked: they cannot push the owner's out.
		if c.cursors.track(m.ChannelID, id) {
			if err := c.cursors.save(); err != nil {
				c.log.Error("discord cursors not saved; a crash now would lose this message", zap.Error(err))
			}
		}
	}
	a.Said = said(m, strings.TrimSpace(replaceMentions(a.Msg.Content, m.Mentions)), bot, edit)
	if !edit {
		a.Prepare = func(ctx context.Context, msg *bus.InboundMessage) error {
			return c.prepare(ctx, m, msg)
		}
	}
	if _, err := c.intake.Admit(ctx, a); errors.Is(err, context.Canceled) {
		c.log.Info("inbound message dropped: shutting down", zap.String("message", m.ID))
	} else if err != nil {
		c.log.Warn("inbound message not delivered to the agent", zap.String("message", m.ID), zap.Error(err))
	}
}

// allowed reports whether the access policy lets u talk to the bot.
func (c *Channel) allowed(u *discordgo.User) bool {
	ok, err := c.access.Allowed(channels.Sender{ID: u.ID, Username: u.Username})
	return ok && err == nil
}

// prepare fetches the attachments of an admitted message.
func (c *Channel) prepare(ctx context.Context, m *discordgo.Message, msg *bus.InboundMessage) error {
	md := c.fetchMedia(ctx, m)
	text := msg.Content
	if md.transcript != "" {
		text = strings.TrimSpace(text + "\n[voice message] " + md.transcript)
	}
	for _, n := range md.notes {
		text = strings.TrimSpace(text + "\n" + n)
	}
	msg.Content, msg.Media = text, md.parts
	return nil
}

// fromHuman filters out bots (this one included), webhooks and system
// messages (joins, pins, boosts...): only ordinary messages and replies.
func fromHuman(m *discordgo.Message, bot string) bool {
	if m.Author == nil || m.Author.Bot || m.Author.System || m.Author.ID == bot || m.WebhookID != "" {
		return false
	}
	return m.Type == discordgo.MessageTypeDefault || m.Type == discordgo.MessageTypeReply
}

// guildGate applies the Discord-only rules for a guild message or command
// before the intake: the guild, role and channel lists, and threads (own
// session, replies stay in the thread). The intake applies group_policy.
func (c *Channel) guildGate(ctx context.Context, guildID, channelID, sender string, member *discordgo.Member, a *channels.Arrival) bool {
	log := c.log.With(zap.String("chat", channelID), zap.String("guild", guildID), zap.String("sender", sender))
	if len(c.cfg.AllowGuilds) > 0 && !slices.Contains(c.cfg.AllowGuilds, guildID) {
		log.Debug("message in a guild not in allow_guilds ignored")
		return false
	}
	if len(c.cfg.AllowRoles) > 0 && (member == nil || !slices.ContainsFunc(member.Roles, func(r string) bool {
		return slices.Contains(c.cfg.AllowRoles, r)
	})) {
		log.Debug("message from a member without an allow_roles role ignored")
		return false
	}
	a.Group, a.GroupID = true, guildID
	a.Msg.Metadata["is_group"] = "true"
	a.Msg.Metadata["guild_id"] = guildID
	parent := channelID
	ci, err := c.lookupChannel(ctx, channelID, guildID)
	if err != nil {
		// Treated as a plain channel: the reply still lands where asked.
		log.Warn("channel lookup failed", zap.Error(err))
	}
	if ci.thread && ci.parentID != "" {
		parent = ci.parentID
		a.Msg.Metadata[MetaThreadID] = channelID
		a.Msg.Metadata[MetaParentID] = parent
		a.Msg.SessionKey = SessionKey(channels.Chat{ID: channelID, Metadata: a.Msg.Metadata})
	}
	if len(c.cfg.AllowChannels) > 0 && !slices.Contains(c.cfg.AllowChannels, channelID) &&
		!slices.Contains(c.cfg.AllowChannels, parent) {
		log.Debug("message in a channel not in allow_channels ignored")
		return false
	}
	return true
}

// addressed reports whether the message mentions the bot (as a user or one
// of its roles) or replies to one of its messages, and returns the bot's
// roles that were mentioned.
func (c *Channel) addressed(ctx context.Context, m *discordgo.Message, bot string) (bool, []string) {
	if m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == bot {
		return true, nil
	}
	mentioned := slices.ContainsFunc(m.Mentions, func(u *discordgo.User) bool { return u != nil && u.ID == bot })
	if len(m.MentionRoles) == 0 {
		return mentioned, nil
	}
	own, err := c.botRoles(ctx, m.GuildID)
	if err != nil {
		c.log.Warn("cannot tell whether a role mention is for the bot", zap.Error(err))
		return mentioned, nil
	}
	var hit []string
	for _, r := range m.MentionRoles {
		if slices.Contains(own, r) {
			hit = append(hit, r)
		}
	}
	return mentioned || len(hit) > 0, hit
}

// displayName is how the sender is shown to the model: the name people see
// (server nickname, else global name) and the @username, which stays put,
// as Telegram's adapter writes them ("Ann Lee (@ann)").
func displayName(u *discordgo.User, member *discordgo.Member) string {
	name := u.GlobalName
	if member != nil && member.Nick != "" {
		name = member.Nick
	}
	if name == "" || name == u.Username {
		return u.Username
	}
	return name + " (@" + u.Username + ")"
}

var mentionToken = regexp.MustCompile(`<@[!&]?(\d+)>`)

// stripBotMention removes the mentions that addressed the bot.
func stripBotMention(text, bot string, roles []string) string {
	return mentionToken.ReplaceAllStringFunc(text, func(tok string) string {
		id := mentionToken.FindStringSubmatch(tok)[1]
		if strings.HasPrefix(tok, "<@&") {
			if slices.Contains(roles, id) {
				return ""
			}
			return tok
		}
		if id == bot {
			return ""
		}
		return tok
	})
}

// replaceMentions shows other users' mentions as @name, which reads better
// to the model than <@123>.
func replaceMentions(text string, users []*discordgo.User) string {
	for _, u := range users {
		if u == nil {
			continue
		}
		name := "@" + u.Username
		text = strings.NewReplacer("<@"+u.ID+">", name, "<@!"+u.ID+">", name).Replace(text)
	}
	return text
}
