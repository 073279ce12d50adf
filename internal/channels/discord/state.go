package discord

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// guildState is the little gateway state the adapter needs, kept instead of
// discordgo's State (which would also cache members, presences and
// messages): the bot's id, the roles the bot holds per guild (for role
// mentions), and which channels are threads of which parent.
type guildState struct {
	mu       sync.RWMutex
	botID    string
	appID    string
	botRoles map[string][]string    // guild id → roles the bot holds
	channels map[string]channelInfo // guild channels and threads by id
}

type channelInfo struct {
	guildID  string
	parentID string // set for threads
	thread   bool
}

func (s *guildState) init() {
	s.botRoles = map[string][]string{}
	s.channels = map[string]channelInfo{}
}

func (s *guildState) setBot(id string) {
	s.mu.Lock()
	s.botID = id
	s.mu.Unlock()
}

func (s *guildState) setApp(id string) {
	s.mu.Lock()
	s.appID = id
	s.mu.Unlock()
}

func (s *guildState) app() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.appID
}

func (s *guildState) bot() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.botID
}

// maxChannels bounds the channel cache (threads pile up over months). An
// evicted channel is simply looked up again.
const maxChannels = 20000

func (s *guildState) addChannel(ch *discordgo.Channel, guildID string) {
	if ch == nil || ch.ID == "" {
		return
	}
	if ch.GuildID != "" {
		guildID = ch.GuildID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.channels[ch.ID]; !known && len(s.channels) >= maxChannels {
		for id := range s.channels { // an arbitrary victim
			delete(s.channels, id)
			break
		}
	}
	s.channels[ch.ID] = infoOf(ch, guildID)
}

func infoOf(ch *discordgo.Channel, guildID string) channelInfo {
	return channelInfo{guildID: guildID, parentID: ch.ParentID, thread: ch.IsThread()}
}

func (s *guildState) removeChannel(id string) {
	s.mu.Lock()
	delete(s.channels, id)
	s.mu.Unlock()
}

func (s *guildState) channel(id string) (channelInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ci, ok := s.channels[id]
	return ci, ok
}

func (s *guildState) setBotRoles(guildID string, roles []string) {
	s.mu.Lock()
	s.botRoles[guildID] = slices.Clone(roles)
	s.mu.Unlock()
}

func (s *guildState) rolesOfBot(guildID string) ([]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.botRoles[guildID]
	return r, ok
}

func (s *guildState) removeGuild(guildID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.botRoles, guildID)
	for id, ci := range s.channels {
		if ci.guildID == guildID {
			delete(s.channels, id)
		}
	}
}

// lookupChannel returns what the adapter knows of a guild channel, asking
// Discord (GET /channels/{id}) for one it has not seen, e.g. an old thread.
func (c *Channel) lookupChannel(ctx context.Context, id, guildID string) (channelInfo, error) {
	if ci, ok := c.state.channel(id); ok {
		return ci, nil
	}
	ch, err := c.sess.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return channelInfo{}, fmt.Errorf("get channel %s: %w", id, err)
	}
	c.state.addChannel(ch, guildID)
	ci, _ := c.state.channel(id)
	return ci, nil
}

// botRoles returns the roles the bot holds in a guild, asking Discord for
// its member record when GUILD_CREATE did not include it.
func (c *Channel) botRoles(ctx context.Context, guildID string) ([]string, error) {
	if r, ok := c.state.rolesOfBot(guildID); ok {
		return r, nil
	}
	m, err := c.sess.GuildMember(guildID, c.state.bot(), discordgo.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("get own member in guild %s: %w", guildID, err)
	}
	c.state.setBotRoles(guildID, m.Roles)
	return m.Roles, nil
}

func (c *Channel) onGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) {
	if g.Guild == nil {
		return
	}
	for _, ch := range g.Channels {
		c.state.addChannel(ch, g.ID)
	}
	for _, th := range g.Threads {
		c.state.addChannel(th, g.ID)
	}
	bot := c.state.bot()
	for _, m := range g.Members {
		if m.User != nil && m.User.ID == bot {
			c.state.setBotRoles(g.ID, m.Roles)
		}
	}
}

func (c *Channel) onGuildDelete(_ *discordgo.Session, g *discordgo.GuildDelete) {
	// Unavailable means an outage, not that the bot left.
	if g.Guild != nil && !g.Unavailable {
		c.state.removeGuild(g.ID)
	}
}

func (c *Channel) onChannelCreate(_ *discordgo.Session, ch *discordgo.ChannelCreate) {
	if ch.Channel != nil && ch.GuildID != "" {
		c.state.addChannel(ch.Channel, ch.GuildID)
	}
}

func (c *Channel) onChannelUpdate(_ *discordgo.Session, ch *discordgo.ChannelUpdate) {
	if ch.Channel != nil && ch.GuildID != "" {
		c.state.addChannel(ch.Channel, ch.GuildID)
	}
}

func (c *Channel) onChannelDelete(_ *discordgo.Session, ch *discordgo.ChannelDelete) {
	if ch.Channel != nil {
		c.state.removeChannel(ch.ID)
	}
}

func (c *Channel) onThreadCreate(_ *discordgo.Session, th *discordgo.ThreadCreate) {
	if th.Channel != nil {
		c.state.addChannel(th.Channel, th.GuildID)
	}
}

func (c *Channel) onThreadUpdate(_ *discordgo.Session, th *discordgo.ThreadUpdate) {
	if th.Channel != nil {
		c.state.addChannel(th.Channel, th.GuildID)
	}
}

func (c *Channel) onThreadDelete(_ *discordgo.Session, th *discordgo.ThreadDelete) {
	if th.Channel != nil {
		c.state.removeChannel(th.ID)
	}
}

func (c *Channel) onThreadListSync(_ *discordgo.Session, l *discordgo.ThreadListSync) {
	for _, th := range l.Threads {
		c.state.addChannel(th, l.GuildID)
	}
}

func (c *Channel) onGuildMemberUpdate(_ *discordgo.Session, m *discordgo.GuildMemberUpdate) {
	if m.Member != nil && m.User != nil && m.User.ID == c.state.bot() {
		c.state.setBotRoles(m.GuildID, m.Roles)
	}
}
