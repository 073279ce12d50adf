package discordfake

import "encoding/json"

// Wire types, written from Discord's API v10 documentation rather than taken
// from discordgo, so that a misreading in the client library shows up as a
// test failure instead of being mirrored by the fake.

// User is a Discord user object.
type User struct {
	ID            string  `json:"id"`
	Username      string  `json:"username"`
	Discriminator string  `json:"discriminator"`
	GlobalName    *string `json:"global_name"`
	Avatar        *string `json:"avatar"`
	Bot           bool    `json:"bot,omitempty"`
}

// Channel types used by the fake (Discord's numbering).
const (
	ChannelGuildText     = 0
	ChannelDM            = 1
	ChannelPublicThread  = 11
	ChannelPrivateThread = 12
)

// Channel is a Discord channel object (guild text channel, DM or thread).
type Channel struct {
	ID         string `json:"id"`
	Type       int    `json:"type"`
	GuildID    string `json:"guild_id,omitempty"`
	Name       string `json:"name,omitempty"`
	ParentID   string `json:"parent_id,omitempty"`
	Recipients []User `json:"recipients,omitempty"`
}

// Role is a guild role.
type Role struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Managed     bool   `json:"managed"`
	Mentionable bool   `json:"mentionable"`
	Permissions string `json:"permissions"`
	Position    int    `json:"position"`
	Color       int    `json:"color"`
	Hoist       bool   `json:"hoist"`
	Flags       int    `json:"flags"`
	// Tags marks the role Discord creates for a bot when it joins a guild.
	Tags *RoleTags `json:"tags,omitempty"`
}

// RoleTags says which bot a managed role belongs to.
type RoleTags struct {
	BotID string `json:"bot_id,omitempty"`
}

// Member is a guild member (as embedded in messages and GUILD_CREATE).
type Member struct {
	User     *User    `json:"user,omitempty"`
	Roles    []string `json:"roles"`
	JoinedAt string   `json:"joined_at"`
	Deaf     bool     `json:"deaf"`
	Mute     bool     `json:"mute"`
}

// Attachment is a file attached to a message.
type Attachment struct {
	ID           string  `json:"id"`
	Filename     string  `json:"filename"`
	ContentType  string  `json:"content_type,omitempty"`
	Size         int     `json:"size"`
	URL          string  `json:"url"`
	ProxyURL     string  `json:"proxy_url"`
	DurationSecs float64 `json:"duration_secs,omitempty"`
	Waveform     string  `json:"waveform,omitempty"`
}

// MessageReference points at the message being replied to.
type MessageReference struct {
	Type            int    `json:"type,omitempty"`
	MessageID       string `json:"message_id,omitempty"`
	ChannelID       string `json:"channel_id,omitempty"`
	GuildID         string `json:"guild_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// AllowedMentions is the allowed_mentions object of a message create/edit.
type AllowedMentions struct {
	Parse       []string `json:"parse"`
	Roles       []string `json:"roles,omitempty"`
	Users       []string `json:"users,omitempty"`
	RepliedUser bool     `json:"replied_user"`
}

// MessageObject is a message as Discord returns and dispatches it.
type MessageObject struct {
	ID                string            `json:"id"`
	ChannelID         string            `json:"channel_id"`
	GuildID           string            `json:"guild_id,omitempty"`
	Author            User              `json:"author"`
	Member            *Member           `json:"member,omitempty"`
	Content           string            `json:"content"`
	Timestamp         string            `json:"timestamp"`
	EditedTimestamp   *string           `json:"edited_timestamp"`
	TTS               bool              `json:"tts"`
	MentionEveryone   bool              `json:"mention_everyone"`
	Mentions          []User            `json:"mentions"`
	MentionRoles      []string          `json:"mention_roles"`
	Attachments       []Attachment      `json:"attachments"`
	Embeds            []json.RawMessage `json:"embeds"`
	Pinned            bool              `json:"pinned"`
	Type              int               `json:"type"`
	Flags             int               `json:"flags"`
	MessageReference  *MessageReference `json:"message_reference,omitempty"`
	ReferencedMessage *MessageObject    `json:"referenced_message,omitempty"`
	// MessageSnapshots hold a forwarded message (message_reference type 1).
	MessageSnapshots []MessageSnapshot `json:"message_snapshots,omitempty"`
	StickerItems     []StickerItem     `json:"sticker_items,omitempty"`
	Poll             *Poll             `json:"poll,omitempty"`
	Activity         *Activity         `json:"activity,omitempty"`
	Application      *Application      `json:"application,omitempty"`
}

// MessageSnapshot is a forwarded message's copy: a partial message object
// (no author, no id).
type MessageSnapshot struct {
	Message SnapshotMessage `json:"message"`
}

// SnapshotMessage is the part of a message a forward copies.
type SnapshotMessage struct {
	Type            int               `json:"type"`
	Content         string            `json:"content"`
	Embeds          []json.RawMessage `json:"embeds"`
	Attachments     []Attachment      `json:"attachments"`
	Timestamp       string            `json:"timestamp"`
	EditedTimestamp *string           `json:"edited_timestamp"`
	Flags           int               `json:"flags"`
	Mentions        []User            `json:"mentions"`
	MentionRoles    []string          `json:"mention_roles"`
	StickerItems    []StickerItem     `json:"sticker_items,omitempty"`
}

// StickerItem is the short form of a sticker sent with a message.
type StickerItem struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	FormatType int    `json:"format_type"`
}

// Poll is a message's poll (the request form: question and answers).
type Poll struct {
	Question         PollMedia    `json:"question"`
	Answers          []PollAnswer `json:"answers"`
	AllowMultiselect bool         `json:"allow_multiselect"`
	LayoutType       int          `json:"layout_type"`
	Expiry           string       `json:"expiry,omitempty"`
}

// PollMedia is a poll's question or an answer's text.
type PollMedia struct {
	Text string `json:"text,omitempty"`
}

// PollAnswer is one answer of a poll.
type PollAnswer struct {
	AnswerID  int       `json:"answer_id"`
	PollMedia PollMedia `json:"poll_media"`
}

// Activity is a rich presence invitation attached to a message.
type Activity struct {
	Type    int    `json:"type"`
	PartyID string `json:"party_id,omitempty"`
}

// Application is the application of a message's activity.
type Application struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Embed is the part of an embed object the fake makes.
type Embed struct {
	Type        string `json:"type,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
}

// Message types and flags the fake produces.
const (
	MessageTypeDefault = 0
	MessageTypeReply   = 19

	// ReferenceForward is message_reference.type of a forward.
	ReferenceForward = 1

	// FlagVoiceMessage marks a voice message (IS_VOICE_MESSAGE).
	FlagVoiceMessage = 1 << 13
)

// Gateway intents (bit positions from Discord's documentation).
const (
	IntentGuilds         = 1 << 0
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
	// privilegedIntents need a switch in the developer portal:
	// GUILD_MEMBERS, GUILD_PRESENCES, MESSAGE_CONTENT.
	privilegedIntents = 1<<1 | 1<<8 | IntentMessageContent
	// knownIntents are the bits defined by API v10.
	knownIntents = 1<<26 - 1
)

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// Gateway close codes (Discord's documented 4000-range codes).
const (
	CloseUnknownError         = 4000
	CloseUnknownOpcode        = 4001
	CloseDecodeError          = 4002
	CloseNotAuthenticated     = 4003
	CloseAuthenticationFailed = 4004
	CloseAlreadyAuthenticated = 4005
	CloseInvalidSeq           = 4007
	CloseRateLimited          = 4008
	CloseSessionTimedOut      = 4009
	CloseInvalidAPIVersion    = 4012
	CloseInvalidIntents       = 4013
	CloseDisallowedIntents    = 4014
)

// payload is one gateway frame.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

type identifyData struct {
	Token      string          `json:"token"`
	Intents    *int            `json:"intents"`
	Properties json.RawMessage `json:"properties"`
	Compress   bool            `json:"compress"`
	Shard      *[2]int         `json:"shard"`
}

type resumeData struct {
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

// apiError is Discord's JSON error body.
type apiError struct {
	Message string          `json:"message"`
	Code    int             `json:"code"`
	Errors  json.RawMessage `json:"errors,omitempty"`
}

// rateLimitBody is the body of a 429.
type rateLimitBody struct {
	Message    string  `json:"message"`
	RetryAfter float64 `json:"retry_after"`
	Global     bool    `json:"global"`
	Code       int     `json:"code,omitempty"`
}

// Discord JSON error codes the fake returns.
const (
	codeUnknownChannel     = 10003
	codeUnknownMessage     = 10008
	codeUnknownUser        = 10013
	codeUnknownMember      = 10007
	codeCannotEditOthers   = 50005
	codeEmptyMessage       = 50006
	codeInvalidFormBody    = 50035
	codeUnauthorized       = 0
	maxContentLen          = 2000
	maxAttachmentsPerCall  = 10
	defaultHeartbeatMillis = 41250
)
