package discord

import (
	"errors"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Metadata keys of a message in a thread: the thread is a channel of its
// own (the chat replies go to), under its parent channel.
const (
	MetaThreadID = "thread_id"
	MetaParentID = "parent_id"
)

// Kind is Discord's row of the channel table (internal/channels/kinds).
var Kind = channels.Kind{
	Name:    Name,
	Section: Section,
	Enabled: func(cfg *config.Config) bool { return Of(cfg).Enabled },
	Access:  func(cfg *config.Config) config.Access { return Of(cfg).Access },
	New: func(cfg *config.Config, d channels.Deps) (channels.Adapter, error) {
		deps := Deps{
			Bus: d.Bus, Pairing: d.Pairing, Workspace: d.Workspace, DataDir: d.DataDir,
			Transcription: d.Transcription, Limits: d.Limits, Meter: d.Meter,
		}
		if d.State != nil {
			deps.Cursors = d.State(Name, CursorFile)
		}
		return New(*Of(cfg), deps, d.Log)
	},
	Renderer: func() channels.Renderer { return NewRenderer(0) },
	Output:   func(cfg *config.Config) config.OutputConfig { return Of(cfg).OutputConfig },
	TokenShape: func(token string) error {
		if !ValidToken(token) {
			return errors.New("that is not a Discord bot token: three parts joined by dots (developer portal → Bot → Reset Token)")
		}
		return nil
	},
	Fix:        "reset the bot token in the Discord developer portal (Bot → Reset Token) and set channels.discord.token",
	StateFiles: []string{CursorFile},
	SessionKey: SessionKey,
	Target:     Target,
	ThreadMeta: []string{MetaThreadID, MetaParentID},
}

// threadPart separates a parent channel from its thread in a session key.
const threadPart = ":thread:"

// SessionKey is the session of a chat: "discord:<channel>", or
// "discord:<parent>:thread:<thread>" for a thread (whose ID is the
// thread's channel, with MetaParentID).
func SessionKey(c channels.Chat) string {
	if parent := c.Metadata[MetaParentID]; parent != "" {
		return Name + ":" + parent + threadPart + c.ID
	}
	return Name + ":" + c.ID
}

// Target reads a session key of SessionKey back into its chat: a thread's
// replies go to the thread's channel.
func Target(key string) (channels.Chat, bool) {
	parent, thread, isThread, ok := channels.SplitKey(key, Name, threadPart)
	switch {
	case !ok:
		return channels.Chat{}, false
	case !isThread:
		return channels.Chat{ID: parent}, true
	}
	return channels.Chat{ID: thread, Metadata: map[string]string{MetaThreadID: thread, MetaParentID: parent}}, true
}

var _ channels.Adapter = (*Channel)(nil)
