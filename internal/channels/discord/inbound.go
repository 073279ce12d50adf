package discord

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// onMessageCreate runs on discordgo's gateway reader (SyncEvents): it only
// hands the message to the inbound goroutine, waiting while that one is
// busy so messages keep their order and memory stays bounded.
func (c *Channel) onMessageCreate(_ *discordgo.Session, e *discordgo.MessageCreate) {
	if e.Message == nil || e.Author == nil {
		return
	}
	ctxp := c.runCtx.Load()
	if ctxp == nil {
		return
	}
	select {
	case c.events <- e.Message:
	case <-(*ctxp).Done():
	}
}

// consume handles inbound messages one at a time until ctx ends.
func (c *Channel) consume(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if n := len(c.events); n > 0 {
				c.log.Info("shutting down with unhandled inbound messages", zap.Int("messages", n))
			}
			return
		case m := <-c.events:
			c.handle(ctx, m)
		}
	}
}

// handle decides whether a message is for the agent and publishes it.
// Everything that can refuse a message runs before any download, so a
// sender who is not allowed costs no more than this check.
func (c *Channel) handle(ctx context.Context, m *discordgo.Message) {
	bot := c.state.bot()
	if !fromHuman(m, bot) {
		return
	}
	if c.dedupe.seen(m.ID) {
		c.log.Debug("duplicate message ignored", zap.String("message", m.ID))
		return
	}
	log := c.log.With(zap.String("chat", m.ChannelID), zap.String("sender", m.Author.ID))
	if !c.senderAllowed(m) {
		log.Debug("message from a sender who is not allowed ignored")
		return
	}
	in := bus.InboundMessage{
		Channel:    Name,
		SenderID:   m.Author.ID,
		SenderName: displayName(m),
		ChatID:     m.ChannelID,
		MessageID:  m.ID,
		Time:       m.Timestamp,
		Metadata:   map[string]string{"is_group": "false"},
	}
	text := m.Content
	if m.GuildID != "" {
		var ok bool
		if text, ok = c.guildRoute(ctx, m, bot, &in); !ok {
			return
		}
	}
	text = strings.TrimSpace(replaceMentions(text, m.Mentions))
	if q := quoted(m, bot); q != "" {
		text = q + "\n" + text
	}
	md := c.fetchMedia(ctx, m)
	if md.transcript != "" {
		text = strings.TrimSpace(text + "\n[voice message] " + md.transcript)
	}
	for _, n := range md.notes {
		text = strings.TrimSpace(text + "\n" + n)
	}
	in.Content, in.Media = text, md.parts
	if in.Content == "" && len(in.Media) == 0 {
		log.Debug("message without text or usable attachments ignored")
		return
	}
	if err := c.deps.Bus.PublishInbound(ctx, in); err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Warn("inbound message not delivered to the agent", zap.String("message", m.ID), zap.Error(err))
		}
	}
}

// fromHuman filters out bots (this one included), webhooks and system
// messages (joins, pins, boosts...): only ordinary messages and replies.
func fromHuman(m *discordgo.Message, bot string) bool {
	if m.Author == nil || m.Author.Bot || m.Author.System || m.Author.ID == bot || m.WebhookID != "" {
		return false
	}
	return m.Type == discordgo.MessageTypeDefault || m.Type == discordgo.MessageTypeReply
}

// guildRoute applies the guild rules: guild and channel allow lists, threads
// (own session, replies stay in the thread), and mention gating unless
// group_policy is open. It returns the text with the bot's mention removed.
func (c *Channel) guildRoute(ctx context.Context, m *discordgo.Message, bot string, in *bus.InboundMessage) (string, bool) {
	log := c.log.With(zap.String("chat", m.ChannelID), zap.String("guild", m.GuildID))
	if len(c.cfg.AllowGuilds) > 0 && !slices.Contains(c.cfg.AllowGuilds, m.GuildID) {
		log.Debug("message in a guild not in allow_guilds ignored")
		return "", false
	}
	in.Metadata["is_group"] = "true"
	in.Metadata["guild_id"] = m.GuildID
	parent := m.ChannelID
	ci, err := c.lookupChannel(ctx, m.ChannelID, m.GuildID)
	if err != nil {
		// Treated as a plain channel: the reply still lands where asked.
		log.Warn("channel lookup failed", zap.Error(err))
	}
	if ci.thread && ci.parentID != "" {
		parent = ci.parentID
		in.SessionKey = Name + ":" + parent + ":thread:" + m.ChannelID
		in.Metadata["thread_id"] = m.ChannelID
		in.Metadata["parent_id"] = parent
	}
	if len(c.cfg.AllowChannels) > 0 && !slices.Contains(c.cfg.AllowChannels, m.ChannelID) &&
		!slices.Contains(c.cfg.AllowChannels, parent) {
		log.Debug("message in a channel not in allow_channels ignored")
		return "", false
	}
	addressed, roles := c.addressed(ctx, m, bot)
	if !addressed && c.cfg.GroupPolicy != "open" {
		return "", false
	}
	return stripBotMention(m.Content, bot, roles), true
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

// senderAllowed applies channels.discord.policy and allow_from / allow_roles.
// Roles only exist in guilds: a DM sender must be in allow_from.
func (c *Channel) senderAllowed(m *discordgo.Message) bool {
	if c.cfg.Policy == "open" {
		return true
	}
	if slices.Contains(c.cfg.AllowFrom, "*") || slices.Contains(c.cfg.AllowFrom, m.Author.ID) {
		return true
	}
	if m.GuildID != "" && m.Member != nil {
		for _, r := range m.Member.Roles {
			if slices.Contains(c.cfg.AllowRoles, r) {
				return true
			}
		}
	}
	return false
}

func displayName(m *discordgo.Message) string {
	if m.Member != nil && m.Member.Nick != "" {
		return m.Member.Nick
	}
	if m.Author.GlobalName != "" {
		return m.Author.GlobalName
	}
	return m.Author.Username
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

// quoted gives context for a reply to someone else's message (replies to
// the bot's own messages are already in the session).
func quoted(m *discordgo.Message, bot string) string {
	ref := m.ReferencedMessage
	if ref == nil || ref.Author == nil || ref.Author.ID == bot || strings.TrimSpace(ref.Content) == "" {
		return ""
	}
	q := []rune(strings.TrimSpace(ref.Content))
	if len(q) > 300 {
		q = append(q[:300], '…')
	}
	return "[replying to @" + ref.Author.Username + ": " + strings.ReplaceAll(string(q), "\n", " ") + "]"
}

// recentIDs remembers the last n message ids, to drop a message Discord
// delivers twice (around reconnects).
type recentIDs struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{set: make(map[string]struct{}, n), ring: make([]string, n)}
}

// seen records id and reports whether it was already there.
func (r *recentIDs) seen(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[id]; ok {
		return true
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
	return false
}
