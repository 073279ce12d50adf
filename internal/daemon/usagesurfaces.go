package daemon

import (
	"slices"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels/cli"
	"github.com/nanobot-go/nanobot/internal/web"
)

// usageOwner is who /usage shows the whole daemon's spending to, every
// chat's included (docs/usage.md#in-a-chat-usage-usage-footer-onoff):
// whoever may open the control panel anyway. That is the web page (its
// user holds the login token), the terminal (its user is on the machine),
// and a direct message from a sender let in by name — listed in the
// channel's allow_from (not merely by "*") or approved by pairing, the
// senders /web gives a login link. Nobody in a group: the answer would be
// read by the whole group.
func usageOwner(links *webLinks) func(bus.InboundMessage) bool {
	return func(m bus.InboundMessage) bool {
		switch {
		case m.Channel == web.Channel, m.Channel == cli.Name:
			return true
		case m.Group != "":
			return false
		}
		return links.allowed(m)
	}
}

// allowedByName reports whether id is listed in list by name, not merely
// let in by "*".
func allowedByName(list []string, id string) bool {
	return id != "" && id != "*" && slices.Contains(list, id)
}
