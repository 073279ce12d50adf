package discordfake

import (
	"encoding/json"
	"regexp"
	"slices"
	"time"
)

// Incoming is a message a user posts, for SendMessageCreate.
type Incoming struct {
	ChannelID string
	Author    User
	Content   string
	// ReplyTo is the id of the message being replied to, if any.
	ReplyTo string
	// NoReplyPing turns off the ping Discord adds to replies by default (the
	// replied-to author then is not in mentions).
	NoReplyPing bool
	// Roles are the author's roles in the guild (for guild channels).
	Roles       []string
	Attachments []IncomingFile
	// Forward is the id of a message this one forwards: it then has no
	// content of its own, and the forwarded message's content and files in
	// message_snapshots, as Discord's clients send a forward.
	Forward  string
	Stickers []StickerItem
	Embeds   []Embed
	Poll     *Poll
	// Activity and App make the message an activity invitation.
	Activity *Activity
	App      *Application
}

// IncomingFile is an attachment of an incoming message. Its bytes are served
// by the fake at the attachment's URL.
type IncomingFile struct {
	Name        string
	ContentType string
	Data        []byte
	// Voice makes the message a voice message (flag IS_VOICE_MESSAGE,
	// duration and waveform set), as Discord's clients send them.
	Voice bool
	// Size overrides the announced size (0: len(Data)).
	Size int
}

var (
	userMention = regexp.MustCompile(`<@!?(\d+)>`)
	roleMention = regexp.MustCompile(`<@&(\d+)>`)
)

// SendMessageCreate posts a user's message and dispatches MESSAGE_CREATE to
// every session, as Discord does: mentions are derived from the content,
// content is blanked for sessions without the Message Content intent (unless
// the bot is mentioned or it is a DM). It returns the message id.
func (s *Server) SendMessageCreate(in Incoming) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[in.ChannelID]
	if !ok {
		s.t.Fatalf("discordfake: SendMessageCreate: unknown channel %s", in.ChannelID)
	}
	if _, ok := s.users[in.Author.ID]; !ok {
		s.users[in.Author.ID] = in.Author
	}
	m := MessageObject{
		ID: s.newID(), ChannelID: ch.ID, GuildID: ch.GuildID, Author: in.Author, Content: in.Content,
		Timestamp: timestamp(time.Now()), Mentions: []User{}, MentionRoles: []string{},
		Attachments: []Attachment{}, Embeds: []json.RawMessage{}, Type: MessageTypeDefault,
	}
	if ch.GuildID != "" {
		roles := slices.Clone(in.Roles)
		if roles == nil {
			roles = []string{}
		}
		m.Member = &Member{Roles: roles, JoinedAt: timestamp(time.Now())}
	}
	for _, sm := range userMention.FindAllStringSubmatch(in.Content, -1) {
		if u, ok := s.users[sm[1]]; ok && !slices.ContainsFunc(m.Mentions, func(x User) bool { return x.ID == u.ID }) {
			m.Mentions = append(m.Mentions, u)
		}
	}
	for _, sm := range roleMention.FindAllStringSubmatch(in.Content, -1) {
		if !slices.Contains(m.MentionRoles, sm[1]) {
			m.MentionRoles = append(m.MentionRoles, sm[1])
		}
	}
	if in.ReplyTo != "" {
		ref, ok := s.byID[in.ReplyTo]
		if !ok {
			s.t.Fatalf("discordfake: SendMessageCreate: unknown message %s", in.ReplyTo)
		}
		m.Type = MessageTypeReply
		m.MessageReference = &MessageReference{Type: 0, MessageID: ref.obj.ID, ChannelID: ref.obj.ChannelID, GuildID: ref.obj.GuildID}
		refObj := ref.obj
		refObj.ReferencedMessage = nil
		m.ReferencedMessage = &refObj
		if !in.NoReplyPing && !slices.ContainsFunc(m.Mentions, func(x User) bool { return x.ID == ref.obj.Author.ID }) {
			m.Mentions = append(m.Mentions, ref.obj.Author)
		}
	}
	if in.Forward != "" {
		src, ok := s.byID[in.Forward]
		if !ok {
			s.t.Fatalf("discordfake: SendMessageCreate: unknown message %s to forward", in.Forward)
		}
		o := src.obj
		m.MessageReference = &MessageReference{Type: ReferenceForward, MessageID: o.ID, ChannelID: o.ChannelID, GuildID: o.GuildID}
		m.MessageSnapshots = []MessageSnapshot{{Message: SnapshotMessage{Type: o.Type, Content: o.Content, Embeds: o.Embeds,
			Attachments: o.Attachments, Timestamp: o.Timestamp, EditedTimestamp: o.EditedTimestamp, Flags: o.Flags,
			Mentions: o.Mentions, MentionRoles: o.MentionRoles, StickerItems: o.StickerItems}}}
	}
	m.StickerItems, m.Poll, m.Activity, m.Application = in.Stickers, in.Poll, in.Activity, in.App
	for _, e := range in.Embeds {
		raw, err := json.Marshal(e)
		if err != nil {
			s.t.Fatalf("discordfake: embed: %v", err)
		}
		m.Embeds = append(m.Embeds, raw)
	}
	for _, f := range in.Attachments {
		size := f.Size
		if size == 0 {
			size = len(f.Data)
		}
		url := s.addFile(File{Name: f.Name, ContentType: f.ContentType, Data: f.Data})
		a := Attachment{ID: s.newID(), Filename: f.Name, ContentType: f.ContentType, Size: size, URL: url, ProxyURL: url}
		if f.Voice {
			a.DurationSecs = 1.5
			a.Waveform = "AAAA"
			m.Flags |= FlagVoiceMessage
		}
		m.Attachments = append(m.Attachments, a)
	}
	st := &stored{obj: m, history: []string{m.Content}}
	s.messages[ch.ID] = append(s.messages[ch.ID], st)
	s.byID[m.ID] = st
	s.dispatchMessage(m)
	s.notify()
	return m.ID
}

// SendMessageUpdate edits a user's message to content and dispatches
// MESSAGE_UPDATE with edited_timestamp set, as Discord does for an edit.
func (s *Server) SendMessageUpdate(messageID, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[messageID]
	if !ok {
		s.t.Fatalf("discordfake: SendMessageUpdate: unknown message %s", messageID)
	}
	st.obj.Content = content
	now := timestamp(time.Now())
	st.obj.EditedTimestamp = &now
	st.history = append(st.history, content)
	s.dispatchUpdate(st.obj)
	s.notify()
}

// AddLinkPreview adds an embed to a message and dispatches MESSAGE_UPDATE
// without edited_timestamp, as Discord does when it unfurls a link.
func (s *Server) AddLinkPreview(messageID string, e Embed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[messageID]
	if !ok {
		s.t.Fatalf("discordfake: AddLinkPreview: unknown message %s", messageID)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		s.t.Fatalf("discordfake: embed: %v", err)
	}
	st.obj.Embeds = append(st.obj.Embeds, raw)
	s.dispatchUpdate(st.obj)
	s.notify()
}

// dispatchUpdate sends MESSAGE_UPDATE under the same intents as a create.
// Callers hold s.mu.
func (s *Server) dispatchUpdate(m MessageObject) {
	need := IntentGuildMessages
	if m.GuildID == "" {
		need = IntentDirectMessages
	}
	s.dispatch("MESSAGE_UPDATE", func(int) any { return m }, need)
}

// Redeliver dispatches an already posted message again, as Discord may do
// around a reconnect, to test inbound dedupe.
func (s *Server) Redeliver(messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[messageID]
	if !ok {
		s.t.Fatalf("discordfake: Redeliver: unknown message %s", messageID)
	}
	s.dispatchMessage(m.obj)
	s.notify()
}

// dispatchMessage sends MESSAGE_CREATE to the sessions whose intents cover
// it. Callers hold s.mu.
func (s *Server) dispatchMessage(m MessageObject) {
	need := IntentGuildMessages
	if m.GuildID == "" {
		need = IntentDirectMessages
	}
	s.dispatch("MESSAGE_CREATE", func(intents int) any {
		if intents&IntentMessageContent != 0 || m.GuildID == "" || m.Author.ID == s.bot.ID ||
			slices.ContainsFunc(m.Mentions, func(u User) bool { return u.ID == s.bot.ID }) {
			return m
		}
		// Without the privileged intent Discord sends the event with the
		// content, attachments and embeds emptied.
		blank := m
		blank.Content = ""
		blank.Attachments = []Attachment{}
		blank.Embeds = []json.RawMessage{}
		return blank
	}, need)
}
