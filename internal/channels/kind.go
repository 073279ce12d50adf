package channels

import (
	"context"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Kind is one row of the channel table (internal/channels/kinds): all the
// daemon, doctor, status, the schedule, the tools, the web panel and the
// sandbox know of a chat channel. A new channel is a folder that exports
// one Kind and one line in that table; nothing outside the two names it
// (TestNoChannelNamesOutsideTheirFolders).
//
// Every func takes the whole configuration and reads its own section from
// it (config.Section), so the callers never see the section's type.
// Optional fields may be nil; the others are required (TestKindsAreComplete).
type Kind struct {
	// Name is the channel's name on the bus, in session keys and in the
	// config (channels.<Name>).
	Name string
	// Section is channels.<Name> for the loader: its struct, its defaults,
	// its credential key and its validation.
	Section config.ChannelSection
	// Enabled reports whether channels.<Name>.enabled is on.
	Enabled func(cfg *config.Config) bool
	// Access is the section's access policy (policy, allow_from,
	// group_policy): the schedule, the message tool's allowlist, the web
	// panel's pairing view and the budget's owner read it.
	Access func(cfg *config.Config) config.Access
	// New builds the adapter for the gateway and for doctor's token check.
	// It does no I/O.
	New func(cfg *config.Config, deps Deps) (Adapter, error)
	// Renderer is how replies are rendered for the platform, and Output the
	// section's reply settings (streaming, edit interval). They belong to
	// the row, not to a built adapter: the manager routes to a channel
	// before its adapter exists (a token pasted later, docs/web.md).
	Renderer func() Renderer
	Output   func(cfg *config.Config) config.OutputConfig
	// TokenShape says what is wrong with a pasted credential's shape (the
	// web page's setup view checks it before calling the platform); nil
	// checks none.
	TokenShape func(token string) error
	// Fix is doctor's advice when the platform refuses the credential
	// (Adapter.Check returns ErrTokenRefused) or it is missing.
	Fix string
	// StateFiles are the names the adapter keeps in the data dir; the
	// sandbox protects them even before they exist.
	StateFiles []string
	// SecretFiles are those of StateFiles whose content is a secret (the
	// token a password login yields): it is redacted from logs and tool
	// output like the config's secrets. nil: none.
	SecretFiles []string
	// Hosts are host names the HTTP listener must answer to for this
	// channel (a webhook's public URL); nil adds none.
	Hosts func(cfg *config.Config) []string
	// SessionKey and Target are the pair that writes and reads this
	// channel's session keys: the adapter files each chat under
	// SessionKey, and cron and the heartbeat deliver to Target(key). A
	// plain chat's key is the bus's default, "<Name>:<chat id>"
	// (bus.InboundMessage.Key), which cron jobs also write.
	SessionKey func(chat Chat) string
	// Target reads a session key of this channel back into the chat it
	// belongs to; false for a key that is not one of this channel's chats.
	Target func(key string) (Chat, bool)
	// ThreadMeta are the metadata keys that place a message inside a chat
	// (a thread, a topic): a cron job's own are replaced by its target's.
	ThreadMeta []string
	// DirectChat is the private chat with a user, when the platform lets
	// the bot write to a user by id alone (a Telegram user's id is their
	// private chat's); the budget's owner defaults to the first user of the
	// first enabled channel that has one. nil: it cannot.
	DirectChat func(userID string) Chat
	// Protect are further paths outside the data dir the sandbox must keep
	// every command from (a credentials file the section names); nil adds
	// none.
	Protect func(cfg *config.Config) []string
}

// Chat is where a message of a channel goes: the chat and, in a forum
// topic or thread, the thread. SessionKey is made from it and Target reads
// it back.
type Chat struct {
	// ID is the chat (Telegram chat, Discord channel, Matrix room) outbound
	// messages are sent to.
	ID string
	// Metadata is what the adapter needs beside ID to send to the right
	// place (a topic's thread id), as the outbound message's metadata.
	Metadata map[string]string
}

// SplitKey reads a session key of the form "<name>:<chat>" or
// "<name>:<chat><sep><sub>" (a topic, a thread), the shape SessionKey of
// Telegram and Discord write: the chat, the part after sep, and whether
// there was one. ok is false for another channel's key, an empty part, or a
// part that holds a colon (which neither platform's ids do).
func SplitKey(key, name, sep string) (chat, sub string, hasSub, ok bool) {
	rest, found := strings.CutPrefix(key, name+":")
	if !found || rest == "" {
		return "", "", false, false
	}
	chat, sub, hasSub = strings.Cut(rest, sep)
	switch {
	case chat == "" || strings.Contains(chat, ":"):
		return "", "", false, false
	case hasSub && (sub == "" || strings.Contains(sub, ":")):
		return "", "", false, false
	}
	return chat, sub, hasSub, true
}

// Adapter is what a Kind builds: the channel itself, its credential check
// and, when it has them, HTTP routes the gateway mounts.
type Adapter interface {
	Channel
	// Check calls the platform once with the credential and says who the
	// bot is (doctor); ErrTokenRefused when the platform refuses it.
	Check(ctx context.Context) (string, error)
}

// Route is one HTTP handler an adapter mounts on gateway.listen.
type Route struct {
	// Pattern is a net/http ServeMux pattern ("POST /telegram/<secret>").
	Pattern string
	// What names it in the start-up line.
	What    string
	Handler http.Handler
}

// Router is the optional capability of an adapter that serves HTTP (a
// webhook); the gateway mounts its routes before it starts.
type Router interface {
	Routes() []Route
}

// Deps is what the daemon gives every adapter beside its config section:
// the same for every channel, so that the gateway builds them all in one
// loop.
type Deps struct {
	// Bus receives inbound messages and the intake's own short replies.
	Bus Publisher
	// Pairing is the shared pairing store.
	Pairing Pairing
	// DataDir holds the adapter's StateFiles; empty keeps state in memory.
	DataDir string
	// Workspace is the agent's workspace root (received files go to inbox/).
	Workspace string
	// Transcription is the voice transcription endpoint; an empty BaseURL
	// turns transcription off.
	Transcription config.TranscriptionConfig
	// Limits bounds inbound messages (IntakeLimits of the section's access).
	Limits IntakeConfig
	// Meter counts and admits transcriptions; nil counts nothing (doctor).
	Meter Meter
	// State returns where the adapter keeps a document of state across
	// restarts (Discord's cursors, Matrix's next_batch) under key, which
	// imports importFile (the data dir's file of old) once; nil, or a nil
	// store, keeps it in that file. With the NATS bus it is a key of the
	// <PREFIX>_CURSORS bucket, so a channels process on another host
	// carries on (docs/scale-out.md).
	State func(key, importFile string) StateStore
	// Log is the channel's logger, already named after it.
	Log *zap.Logger
}

// StateStore keeps one document of an adapter's state: a file in the data
// dir, or a key of a NATS KV bucket when scaled out.
type StateStore interface {
	// Load returns the document last saved, found false when there is
	// none. It is called once, when the adapter starts, and may wait for
	// its backend until ctx ends.
	Load(ctx context.Context) (data []byte, found bool, err error)
	// Save replaces the document, durably once it returns nil. A failed
	// save is logged and retried with the next change; it must give up
	// when ctx ends.
	Save(ctx context.Context, data []byte) error
}
