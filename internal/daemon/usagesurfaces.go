package daemon

import (
	"slices"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels/cli"
	"github.com/nanobot-go/nanobot/internal/web"
)

// isOwner is the one rule of who the daemon's owner is, for /budget lift
// and /usage (docs/usage.md#in-a-chat-usage-usage-footer-onoff): whoever
// may open the control panel anyway. That is the web page (its user holds
// the login token), the terminal (its user is on the machine), budget.owner's
// chat, and a sender let in by name — listed in the channel's allow_from
// (not merely by "*") or approved by pairing, the senders /web gives a login
// link.
func isOwner(links *webLinks, m bus.InboundMessage) bool {
	switch {
	case m.Channel == web.Channel, m.Channel == cli.Name:
		return true
	}
	if ch, id := ownerChat(links.cfg); links.cfg.Budget.Owner != "" && m.Channel == ch && m.ChatID == id {
		return true
	}
	return links.allowed(m)
}

// usageOwner is whom /usage shows the whole daemon's spending, every
// chat's included: the owner, outside a group, where the answer would be
// read by everyone in it.
func usageOwner(links *webLinks) func(bus.InboundMessage) bool {
	return func(m bus.InboundMessage) bool {
		return m.Group == "" && isOwner(links, m)
	}
}

// allowedByName reports whether id is listed in list by name, not merely
// let in by "*".
func allowedByName(list []string, id string) bool {
	return id != "" && id != "*" && slices.Contains(list, id)
}
