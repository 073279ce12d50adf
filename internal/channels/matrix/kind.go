package matrix

import (
	"strings"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
)

// MetaThreadID is the metadata key of a message in a thread: the thread's
// root event, which replies relate to (m.thread).
const MetaThreadID = "thread_id"

// Kind is Matrix's row of the channel table (internal/channels/kinds).
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
			if s := d.State(Name, StateFile); s != nil {
				deps.State = s
			}
		}
		return New(*Of(cfg), deps, d.Log)
	},
	Renderer: func() channels.Renderer { return NewRenderer() },
	Output:   func(cfg *config.Config) config.OutputConfig { return Of(cfg).OutputConfig },
	Fix: "create an access token for the bot's account (docs/matrix.md) and set channels.matrix.access_token, " +
		"or set channels.matrix.password to log in",
	StateFiles: []string{StateFile, LoginFile},
	// The token a password login got: redacted like a config secret.
	SecretFiles: []string{LoginFile},
	SessionKey:  SessionKey,
	Target:      Target,
	ThreadMeta:  []string{MetaThreadID},
}

// threadSep separates a room from a thread root in a session key. Room
// ids hold a colon ("!abc:example.org"), and so do event ids of old room
// versions ("$abc:example.org"), so the key is cut at the last ":thread:".
const threadSep = ":thread:"

// SessionKey is the session of a chat: "matrix:<room>", or
// "matrix:<room>:thread:<root event>" for a thread (MetaThreadID): a
// thread is a conversation of its own, as on Discord.
func SessionKey(c channels.Chat) string {
	if root := c.Metadata[MetaThreadID]; root != "" {
		return Name + ":" + c.ID + threadSep + root
	}
	return Name + ":" + c.ID
}

// Target reads a session key of SessionKey back into its chat.
func Target(key string) (channels.Chat, bool) {
	rest, ok := strings.CutPrefix(key, Name+":")
	if !ok || rest == "" || strings.ContainsAny(rest, " \t\n") {
		return channels.Chat{}, false
	}
	if i := strings.LastIndex(rest, threadSep); i >= 0 {
		room, root := rest[:i], rest[i+len(threadSep):]
		if room == "" || root == "" {
			return channels.Chat{}, false
		}
		return channels.Chat{ID: room, Metadata: map[string]string{MetaThreadID: root}}, true
	}
	return channels.Chat{ID: rest}, true
}

var _ channels.Adapter = (*Channel)(nil)
