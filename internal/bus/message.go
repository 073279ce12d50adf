package bus

import (
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// InboundMessage is one thing a user (or the scheduler) said to the agent
// (docs/architecture.md#one-message-end-to-end).
type InboundMessage struct {
	// Channel is the channel's name: "telegram", "discord", "cli", "system".
	Channel string
	// SenderID is the platform's stable user id (numeric for Telegram/Discord).
	SenderID string
	// SenderName is a display name or @username, for logs and the prompt.
	SenderName string
	// ChatID is where replies go (a DM, group or channel id).
	ChatID string
	// MessageID is the platform's id of this message, for replies and dedupe.
	MessageID string
	Content   string
	// Media holds images and files already fetched by the channel.
	Media []llm.Part
	// Metadata carries channel-specific routing facts (thread id, topic id,
	// is_group...) that must come back unchanged on the replies.
	Metadata map[string]string
	// SessionKey overrides the default "channel:chat_id" key, e.g. for a
	// Telegram forum topic or a Discord thread.
	SessionKey string
	// Group names the group conversation the message was posted in
	// ("telegram:-100123", "discord:<guild id>"); empty for a direct message.
	// The agent shares its turns fairly between groups and direct messages by it.
	Group string
	Time  time.Time
	// Ack, when set, is called once the message has been answered (its turn's
	// final message delivered, see OutboundMessage.Delivered) or deliberately
	// dropped. A channel that can be redelivered messages confirms them to
	// the platform only then. Until then a redelivery (after a crash) is
	// expected: the agent recognises the message by MessageID in the session
	// and finishes its turn, or sends its recorded answer again, instead of
	// answering it a second time.
	Ack func()

	// Model, when set, is the route this turn uses instead of the session's
	// (a name under routes, or "provider/model"); it is not persisted, and
	// commands ignore it. Empty keeps the session's route or the default.
	Model string
	// History is what came before Content in the sender's own record of the
	// conversation (user and assistant text, oldest first), for senders that
	// re-send the whole conversation with every message. The agent seeds an
	// empty session with it before the turn's message and ignores it when the
	// session already has messages: then the session is the record.
	History []llm.Message
	// Ephemeral asks for a turn that leaves nothing behind: its session
	// lives in memory for this turn only (no file, no memory consolidation),
	// Content is never taken as a command, and tools that outlive the turn
	// (spawn, cron) are not offered.
	Ephemeral bool
	// More says the channel is handing over several of this session's
	// messages at once (a catch-up after a restart, a batch of updates)
	// and the next one follows this one straight away. The agent starts no
	// turn on a message marked More until the rest has come (for a moment
	// at most), so what the user wrote while the bot was away is answered
	// together, as a burst queued during a turn is.
	More bool
}

// Key returns the session key: SessionKey if set, otherwise "channel:chat_id".
func (m InboundMessage) Key() string {
	if m.SessionKey != "" {
		return m.SessionKey
	}
	return m.Channel + ":" + m.ChatID
}

// Kind says what an OutboundMessage is for.
type Kind uint8

const (
	// KindMessage is a complete message that is not a turn's answer: the
	// message tool, a cron reminder, a subagent announcement.
	KindMessage Kind = iota
	// KindDraft carries the turn's reply so far (cumulative, not a delta);
	// channels that can edit show it growing in one message.
	KindDraft
	// KindStatus is a short progress line while tools run ("reading notes.md").
	KindStatus
	// KindFinal is the turn's answer. It replaces any draft of the same turn
	// and ends the turn (stop typing). Empty Content just ends the turn. Every
	// turn that published KindStart publishes exactly one KindFinal.
	KindFinal
	// KindStart says a turn began for the chat: channels show "typing" until
	// the turn's KindFinal arrives. It carries no content.
	KindStart
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindDraft:
		return "draft"
	case KindStatus:
		return "status"
	case KindFinal:
		return "final"
	case KindStart:
		return "start"
	}
	return "unknown"
}

// OutboundMessage is something the agent wants a channel to show
// (docs/channels.md#outbound-manager).
type OutboundMessage struct {
	Channel string
	ChatID  string
	Kind    Kind
	// Content is Markdown; channels render it for their platform.
	Content string
	// Media are images or files to send (outbound attachments).
	Media []llm.Part
	// ReplyTo is the platform message id being answered, if any.
	ReplyTo string
	// TurnID groups the drafts, statuses and final message of one turn.
	TurnID string
	// Metadata is the inbound message's metadata, echoed back.
	Metadata map[string]string
	// IsError marks a final message that reports a failure.
	IsError bool
	// Usage is, on a KindFinal, the tokens the turn's model calls used, all
	// of them summed (zero when no model call completed).
	Usage llm.Usage
	// Stop is, on a KindFinal, why the model stopped its answer
	// (docs/reliability.md#every-turn-ends-with-something-to-read):
	// llm.StopLength for a cut answer, a refusal or filter for a withheld one;
	// empty when the turn ended without a model answer. Content already
	// carries the note the user reads.
	Stop llm.StopReason
	// Delivered, when set, is called by the channel manager once the message
	// was handed to the platform, or given up on for good (refused, retries
	// exhausted); not when shutdown cut its delivery short. The agent
	// acknowledges a turn's inbound messages with it.
	Delivered func()
}
