// Package discordfake is a fake Discord for tests: the REST API (v9 and v10,
// JSON and multipart) over httptest and the gateway over gorilla/websocket,
// speaking the real wire protocol including its errors (400 bodies, 429 with
// retry_after, close codes, op 7 RECONNECT, op 9 INVALID_SESSION, RESUME
// with replay of missed events). Tests drive it with helpers (SendMessageCreate,
// DropConnections, Fail...) and wait for results with deadline-bound helpers
// (WaitMessages, WaitFor) instead of sleeping.
//
// Test code only; the adapter under test points its api_url at URL().
package discordfake

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
)

// Token is the bot token the fake accepts unless Options say otherwise,
// shaped like a real one (three dot-separated parts) so that it passes
// config validation.
const Token = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GfAkEt.test-token-0123456789abcdefghijk"

// Options configure a Server. The zero value is usable.
type Options struct {
	// Token is the bot token the fake accepts (REST "Bot <token>", gateway
	// IDENTIFY/RESUME with or without the "Bot " prefix). Default Token.
	Token string
	// BotName is the bot user's name. Default "nanobot".
	BotName string
	// DisallowMessageContent models an application whose Message Content
	// intent is switched off in the developer portal: an IDENTIFY asking for
	// it is closed with 4014.
	DisallowMessageContent bool
	// HeartbeatInterval is sent in HELLO. Default 41.25 s, Discord's value.
	HeartbeatInterval time.Duration
	// WaitTimeout bounds every Wait helper. Default 10 s.
	WaitTimeout time.Duration
}

// Server is a running fake Discord. All methods are safe for concurrent use;
// the Wait helpers must be called from the test's goroutine.
type Server struct {
	t        fakes.TB
	opts     Options
	http     *httptest.Server
	upgrader websocket.Upgrader

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every state change
	closed       bool
	nextID       uint64
	bot          User
	appID        string
	users        map[string]User
	guilds       map[string]*guild
	guildIDs     []string // in creation order, for READY and GUILD_CREATE
	channels     map[string]*Channel
	messages     map[string][]*stored // channel id → messages in order
	byID         map[string]*stored
	noHistory    map[string]bool // channels whose history the bot may not read
	typing       map[string]int
	files        map[string]File // attachment path → content
	sessions     map[string]*session
	conns        map[*conn]struct{}
	failures     map[string][]Failure
	requests     []Request
	stats        Stats
	commands     []map[string]any
	interactions []*Interaction

	wg sync.WaitGroup // gateway handlers and their writers
}

type guild struct {
	id, name   string
	roles      []Role
	members    map[string]*Member
	channelIDs []string
	botRoleID  string
}

type stored struct {
	obj     MessageObject
	byBot   bool
	allowed *AllowedMentions
	files   []File
	history []string
	deleted bool
}

// Stats counts what happened on the gateway.
type Stats struct {
	Connections     int // websocket connections accepted
	Identifies      int // sessions created (READY sent)
	Resumes         int // successful RESUMEs (RESUMED sent)
	InvalidSessions int // op 9 sent, on demand or for a failed RESUME
	Heartbeats      int // op 1 received
	Live            int // connections currently attached to a session
	// CloseCodes lists close codes received from the client, in order.
	CloseCodes []int
	// IdentifyCompress records the compress flag of the last IDENTIFY.
	IdentifyCompress bool
	// Intents records the intents of the last IDENTIFY.
	Intents int
}

// Request is one REST call as the fake received it.
type Request struct {
	Method string
	// Route is the route pattern, one of the Route* constants.
	Route string
	Path  string
	// Body is the JSON body (for multipart, the payload_json part).
	Body []byte
	// Status is the HTTP status answered (0 while in flight, or when the
	// connection was dropped).
	Status int
}

// File is an uploaded or downloadable attachment.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Message is a message as the fake stored it.
type Message struct {
	ID        string
	ChannelID string
	GuildID   string
	AuthorID  string
	Content   string
	// Reference is the message_reference sent with it, if any.
	Reference *MessageReference
	// AllowedMentions is what the request carried (nil: none sent).
	AllowedMentions *AllowedMentions
	// Pings lists who the message notified under Discord's rules for the
	// allowed_mentions it carried: user ids, "role:<id>", "@everyone".
	Pings   []string
	Files   []File
	Edits   int
	History []string // every content the message had, oldest first
	Deleted bool
}

// New starts a fake Discord and stops it when the test ends.
func New(t fakes.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = Token
	}
	if opts.BotName == "" {
		opts.BotName = "nanobot"
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = defaultHeartbeatMillis * time.Millisecond
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 10 * time.Second
	}
	s := &Server{
		t:         t,
		opts:      opts,
		changed:   make(chan struct{}),
		nextID:    1_100_000_000_000_000_000,
		users:     map[string]User{},
		guilds:    map[string]*guild{},
		channels:  map[string]*Channel{},
		messages:  map[string][]*stored{},
		byID:      map[string]*stored{},
		noHistory: map[string]bool{},
		typing:    map[string]int{},
		files:     map[string]File{},
		sessions:  map[string]*session{},
		conns:     map[*conn]struct{}{},
		failures:  map[string][]Failure{},
		upgrader:  websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
	}
	s.bot = User{ID: s.newID(), Username: opts.BotName, Discriminator: "0", Bot: true}
	s.appID = s.bot.ID
	s.users[s.bot.ID] = s.bot
	s.http = httptest.NewServer(s.routes())
	t.Cleanup(s.Close)
	return s
}

// URL is the base URL to use as channels.discord.api_url.
func (s *Server) URL() string { return s.http.URL }

// Token is the bot token the fake accepts.
func (s *Server) Token() string { return s.opts.Token }

// Bot is the bot's user.
func (s *Server) Bot() User { return s.bot }

// Close drops every connection and stops the server. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		c.drop()
	}
	s.mu.Unlock()
	s.http.Close()
	s.wg.Wait()
}

// newID returns a fresh snowflake. Callers hold s.mu or own s exclusively.
// newID returns a snowflake: the time in its upper bits, as Discord's
// (clients read a message's age from its id), and strictly increasing.
func (s *Server) newID() string {
	const discordEpoch = 1420070400000 // ms, 2015-01-01 UTC
	s.nextID = max(s.nextID+1, uint64(time.Now().UnixMilli()-discordEpoch)<<22)
	return strconv.FormatUint(s.nextID, 10)
}

// notify wakes the Wait helpers. Callers hold s.mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// NewUser registers a human user.
func (s *Server) NewUser(name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := User{ID: s.newID(), Username: name, Discriminator: "0"}
	s.users[u.ID] = u
	return u
}

// NewBotUser registers another bot (whose messages the adapter must ignore).
func (s *Server) NewBotUser(name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := User{ID: s.newID(), Username: name, Discriminator: "0", Bot: true}
	s.users[u.ID] = u
	return u
}

// AddGuild creates a guild the bot is a member of, with the managed role
// Discord gives a bot on joining, and dispatches GUILD_CREATE to live
// sessions.
func (s *Server) AddGuild(name string) (guildID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &guild{id: s.newID(), name: name, members: map[string]*Member{}}
	everyone := Role{ID: g.id, Name: "@everyone", Permissions: "0"}
	g.botRoleID = s.newID()
	botRole := Role{ID: g.botRoleID, Name: s.bot.Username, Managed: true, Permissions: "0",
		Position: 1, Tags: &RoleTags{BotID: s.bot.ID}}
	g.roles = []Role{everyone, botRole}
	bot := s.bot
	g.members[s.bot.ID] = &Member{User: &bot, Roles: []string{g.botRoleID}, JoinedAt: timestamp(time.Now())}
	s.guilds[g.id] = g
	s.guildIDs = append(s.guildIDs, g.id)
	s.dispatch("GUILD_CREATE", func(int) any { return s.guildCreate(g) }, IntentGuilds)
	s.notify()
	return g.id
}

// BotRoleID is the managed role the bot got when joining guildID.
func (s *Server) BotRoleID(guildID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mustGuild(guildID).botRoleID
}

// AddRole creates a role in a guild.
func (s *Server) AddRole(guildID, name string) (roleID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.mustGuild(guildID)
	r := Role{ID: s.newID(), Name: name, Permissions: "0", Mentionable: true, Position: len(g.roles)}
	g.roles = append(g.roles, r)
	return r.ID
}

// AddMember adds a user to a guild with the given roles.
func (s *Server) AddMember(guildID string, u User, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.mustGuild(guildID)
	g.members[u.ID] = &Member{User: &u, Roles: slices.Clone(roles), JoinedAt: timestamp(time.Now())}
}

// AddTextChannel creates a guild text channel (CHANNEL_CREATE is dispatched).
func (s *Server) AddTextChannel(guildID, name string) (channelID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.mustGuild(guildID)
	c := &Channel{ID: s.newID(), Type: ChannelGuildText, GuildID: g.id, Name: name}
	s.channels[c.ID] = c
	g.channelIDs = append(g.channelIDs, c.ID)
	s.dispatch("CHANNEL_CREATE", func(int) any { return *c }, IntentGuilds)
	s.notify()
	return c.ID
}

// AddThread creates a public thread under a text channel (THREAD_CREATE is
// dispatched).
func (s *Server) AddThread(parentID, name string) (threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.channels[parentID]
	if !ok || p.GuildID == "" {
		s.t.Fatalf("discordfake: AddThread: %s is not a guild channel", parentID)
	}
	c := &Channel{ID: s.newID(), Type: ChannelPublicThread, GuildID: p.GuildID, Name: name, ParentID: parentID}
	s.channels[c.ID] = c
	s.guilds[p.GuildID].channelIDs = append(s.guilds[p.GuildID].channelIDs, c.ID)
	s.dispatch("THREAD_CREATE", func(int) any {
		return map[string]any{"id": c.ID, "type": c.Type, "guild_id": c.GuildID, "name": c.Name,
			"parent_id": c.ParentID, "newly_created": true,
			"thread_metadata": map[string]any{"archived": false, "auto_archive_duration": 1440, "locked": false}}
	}, IntentGuilds)
	s.notify()
	return c.ID
}

// AddDM opens (or returns) the DM channel between the bot and u.
func (s *Server) AddDM(u User) (channelID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dmChannel(u).ID
}

func (s *Server) dmChannel(u User) *Channel {
	for _, c := range s.channels {
		if c.Type == ChannelDM && len(c.Recipients) == 1 && c.Recipients[0].ID == u.ID {
			return c
		}
	}
	s.users[u.ID] = u
	c := &Channel{ID: s.newID(), Type: ChannelDM, Recipients: []User{u}}
	s.channels[c.ID] = c
	return c
}

func (s *Server) mustGuild(id string) *guild {
	g, ok := s.guilds[id]
	if !ok {
		s.t.Fatalf("discordfake: unknown guild %s", id)
	}
	return g
}

// Messages returns the messages the bot sent to a channel, oldest first,
// including deleted ones (marked).
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages[channelID] {
		if m.byBot {
			out = append(out, m.public())
		}
	}
	return out
}

// AllBotMessages returns every message the bot sent anywhere.
func (s *Server) AllBotMessages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.messages {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, m := range s.messages[id] {
			if m.byBot {
				out = append(out, m.public())
			}
		}
	}
	return out
}

func (m *stored) public() Message {
	p := Message{
		ID: m.obj.ID, ChannelID: m.obj.ChannelID, GuildID: m.obj.GuildID, AuthorID: m.obj.Author.ID,
		Content: m.obj.Content, Reference: m.obj.MessageReference, AllowedMentions: m.allowed,
		Files: slices.Clone(m.files), Edits: len(m.history) - 1, History: slices.Clone(m.history),
		Deleted: m.deleted,
	}
	p.Pings = pings(m.obj, m.allowed)
	return p
}

// Typing reports how many typing indicators were triggered in a channel.
func (s *Server) Typing(channelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channelID]
}

// Requests returns every REST call received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Stats returns the gateway counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.CloseCodes = slices.Clone(s.stats.CloseCodes)
	st.Live = 0
	for _, ss := range s.sessions {
		if ss.conn != nil {
			st.Live++
		}
	}
	return st
}

// Commands returns the application commands registered by the last bulk
// overwrite.
func (s *Server) Commands() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands)
}

// WaitFor blocks until cond returns true, failing the test after the wait
// timeout. cond may call the Server's getters; it is re-evaluated after every
// state change, never on a timer.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(s.opts.WaitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("discordfake: timed out after %s waiting for %s", s.opts.WaitTimeout, what)
		}
	}
}

// WaitMessages waits until the bot has sent at least n messages to a channel
// and returns them.
func (s *Server) WaitMessages(t testing.TB, channelID string, n int) []Message {
	t.Helper()
	var got []Message
	s.WaitFor(t, fmt.Sprintf("%d bot messages in channel %s", n, channelID), func() bool {
		got = s.Messages(channelID)
		return len(got) >= n
	})
	return got
}

// WaitReady waits until n sessions have been identified (READY sent) and a
// connection is live.
func (s *Server) WaitReady(t testing.TB, n int) {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d READY", n), func() bool {
		st := s.Stats()
		return st.Identifies >= n && st.Live > 0
	})
}

// WaitResumed waits until n RESUMEs succeeded and a connection is live.
func (s *Server) WaitResumed(t testing.TB, n int) {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d RESUMED", n), func() bool {
		st := s.Stats()
		return st.Resumes >= n && st.Live > 0
	})
}

// WaitTyping waits until at least n typing indicators hit a channel.
func (s *Server) WaitTyping(t testing.TB, channelID string, n int) {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d typing in %s", n, channelID), func() bool { return s.Typing(channelID) >= n })
}

// File is served at an attachment URL; it returns the URL.
func (s *Server) addFile(f File) string {
	path := "/attachments/" + s.newID() + "/" + f.Name
	s.files[path] = f
	return s.http.URL + path
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }

// pings applies Discord's allowed_mentions rules to a sent message.
func pings(m MessageObject, am *AllowedMentions) []string {
	parse := func(kind string) bool { return am == nil || slices.Contains(am.Parse, kind) }
	var out []string
	for _, u := range m.Mentions {
		if parse("users") || (am != nil && slices.Contains(am.Users, u.ID)) {
			out = append(out, u.ID)
		}
	}
	for _, r := range m.MentionRoles {
		if parse("roles") || (am != nil && slices.Contains(am.Roles, r)) {
			out = append(out, "role:"+r)
		}
	}
	if (strings.Contains(m.Content, "@everyone") || strings.Contains(m.Content, "@here")) && parse("everyone") {
		out = append(out, "@everyone")
	}
	if m.ReferencedMessage != nil && (am == nil || am.RepliedUser) {
		out = append(out, "reply:"+m.ReferencedMessage.Author.ID)
	}
	return out
}
