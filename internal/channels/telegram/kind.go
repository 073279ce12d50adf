package telegram

import (
	"errors"
	"net/url"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
)

// JournalFile is the update journal in the data dir: updates taken from
// Telegram but not yet recorded by the agent, so that a restart neither
// drops nor re-answers a message.
const JournalFile = "telegram-updates.json"

// Kind is Telegram's row of the channel table (internal/channels/kinds).
var Kind = channels.Kind{
	Name:    Name,
	Section: Section,
	Enabled: func(cfg *config.Config) bool { return Of(cfg).Enabled },
	Access:  func(cfg *config.Config) config.Access { return Of(cfg).Access },
	New: func(cfg *config.Config, d channels.Deps) (channels.Adapter, error) {
		return New(*Of(cfg), Deps{
			Bus: d.Bus, Pairing: d.Pairing, DataDir: d.DataDir, Workspace: d.Workspace,
			Transcription: d.Transcription, Limits: d.Limits, Meter: d.Meter,
		}, d.Log)
	},
	Renderer: func() channels.Renderer { return NewRenderer() },
	Output:   func(cfg *config.Config) config.OutputConfig { return Of(cfg).OutputConfig },
	TokenShape: func(token string) error {
		if !ValidToken(token) {
			return errors.New("that is not a Telegram bot token: it looks like 123456789:AAF… (from @BotFather)")
		}
		return nil
	},
	Fix:        "get the token from @BotFather (/mybots → API Token) and set channels.telegram.token",
	StateFiles: []string{JournalFile},
	Hosts: func(cfg *config.Config) []string {
		if u, err := url.Parse(Of(cfg).WebhookURL); err == nil && u.Host != "" {
			return []string{u.Hostname()}
		}
		return nil
	},
	SessionKey: SessionKey,
	Target:     Target,
	ThreadMeta: []string{MetaThreadID},
	DirectChat: func(userID string) channels.Chat { return channels.Chat{ID: userID} },
}

// topicPart separates a chat from its forum topic in a session key.
const topicPart = ":topic:"

// SessionKey is the session of a chat: "telegram:<chat>", or
// "telegram:<chat>:topic:<thread>" for a forum topic (MetaThreadID).
func SessionKey(c channels.Chat) string {
	if thread := c.Metadata[MetaThreadID]; thread != "" {
		return Name + ":" + c.ID + topicPart + thread
	}
	return Name + ":" + c.ID
}

// Target reads a session key of SessionKey back into its chat.
func Target(key string) (channels.Chat, bool) {
	chat, thread, topic, ok := channels.SplitKey(key, Name, topicPart)
	switch {
	case !ok:
		return channels.Chat{}, false
	case !topic:
		return channels.Chat{ID: chat}, true
	}
	return channels.Chat{ID: chat, Metadata: map[string]string{MetaThreadID: thread}}, true
}

// Routes is the webhook, in webhook mode.
func (c *Channel) Routes() []channels.Route {
	if c.cfg.Mode != "webhook" {
		return nil
	}
	path, h := c.WebhookHandler()
	return []channels.Route{{Pattern: "POST " + path, What: "telegram webhook", Handler: h}}
}

var (
	_ channels.Adapter = (*Channel)(nil)
	_ channels.Router  = (*Channel)(nil)
)
