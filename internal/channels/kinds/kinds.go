// Package kinds is the channel table: one row (a channels.Kind) per chat
// channel adapter. The gateway, doctor, status, the schedule's delivery,
// the message tool, the web panel, the budget's owner and the sandbox
// iterate it; none of them names a channel. Adding a channel is its folder
// under internal/channels and one line in All (docs/architecture.md, "Add
// a channel").
//
// Only internal/daemon and cmd import it; config receives the sections as
// data (Sections), so it stays below the adapters.
package kinds

import (
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/channels/matrix"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
)

// All is the table, in the order status, doctor and the panel list the
// channels.
var All = []channels.Kind{
	telegram.Kind,
	discord.Kind,
	matrix.Kind,
}

// Sections are the rows' config sections, for config.Load and
// config.Defaults.
func Sections() []config.ChannelSection {
	out := make([]config.ChannelSection, len(All))
	for i, k := range All {
		out[i] = k.Section
	}
	return out
}

// ByName returns the row of the channel name, found false for a name that
// is no chat adapter (the web page, the terminal, "system").
func ByName(name string) (channels.Kind, bool) {
	for _, k := range All {
		if k.Name == name {
			return k, true
		}
	}
	return channels.Kind{}, false
}

// Target reads any row's session key back into its channel's chat: the
// row whose name starts the key decides.
func Target(key string) (channels.Kind, channels.Chat, bool) {
	for _, k := range All {
		if c, ok := k.Target(key); ok {
			return k, c, true
		}
	}
	return channels.Kind{}, channels.Chat{}, false
}
