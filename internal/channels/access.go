package channels

import (
	"fmt"
	"strings"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Access policies (docs/channels.md#inbound-access-pairingstore-intake-lanes).
const (
	PolicyAllowlist = "allowlist"
	PolicyOpen      = "open"
	PolicyPairing   = "pairing"

	GroupMention = "mention"
	GroupOpen    = "open"
)

// Access decides who may talk to a channel's bot. Build it once per channel
// with NewAccess; it is safe for concurrent use.
type Access struct {
	channel     string
	policy      string
	groupPolicy string
	all         bool
	ids         map[string]bool
	usernames   map[string]bool // lower case, without "@"
	pairing     Pairing
}

// Sender identifies who wrote a message.
type Sender struct {
	// ID is the platform's stable user id; allowlists should use it.
	ID string
	// Username is the platform's @name without "@", if any. Allowlist
	// entries starting with "@" match it; usernames can be changed and
	// reused, so they are weaker than ids.
	Username string
}

// NewAccess builds channel's access policy from cfg. pairing is the shared
// pairing store; it is required for the pairing policy and may be nil
// otherwise. An allowlist policy with an empty allow_from is an error:
// nobody could ever talk to the bot, and silently opening it would be worse.
func NewAccess(channel string, cfg config.Access, pairing Pairing) (*Access, error) {
	a := &Access{
		channel:     channel,
		policy:      cfg.Policy,
		groupPolicy: cfg.GroupPolicy,
		ids:         map[string]bool{},
		usernames:   map[string]bool{},
		pairing:     pairing,
	}
	if a.policy == "" {
		a.policy = PolicyAllowlist
	}
	if a.groupPolicy == "" {
		a.groupPolicy = GroupMention
	}
	switch a.policy {
	case PolicyAllowlist, PolicyOpen:
	case PolicyPairing:
		if pairing == nil {
			return nil, fmt.Errorf("channels.%s.policy: pairing needs a pairing store", channel)
		}
	default:
		return nil, fmt.Errorf("channels.%s.policy: %q is not allowlist, open or pairing", channel, cfg.Policy)
	}
	switch a.groupPolicy {
	case GroupMention, GroupOpen:
	default:
		return nil, fmt.Errorf("channels.%s.group_policy: %q is not mention or open", channel, cfg.GroupPolicy)
	}
	for _, id := range cfg.AllowFrom {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
		case id == "*":
			a.all = true
		case strings.HasPrefix(id, "@"):
			a.usernames[strings.ToLower(id[1:])] = true
		default:
			a.ids[id] = true
		}
	}
	if a.policy == PolicyAllowlist && !a.all && len(a.ids) == 0 && len(a.usernames) == 0 {
		return nil, fmt.Errorf("channels.%s.allow_from: must not be empty with policy allowlist (use [\"*\"] or policy open to allow everyone)", channel)
	}
	return a, nil
}

// Policy returns the policy in force.
func (a *Access) Policy() string { return a.policy }

// Allowed reports whether s may talk to the bot. Under pairing it also
// consults the pairing store (approvals made by `nanobot pairing approve`
// from another process are seen at once).
func (a *Access) Allowed(s Sender) (bool, error) {
	if a.policy == PolicyOpen || a.all || a.ids[s.ID] {
		return true, nil
	}
	if s.Username != "" && a.usernames[strings.ToLower(strings.TrimPrefix(s.Username, "@"))] {
		return true, nil
	}
	if a.policy == PolicyPairing {
		return a.pairing.IsApproved(a.channel, s.ID)
	}
	return false, nil
}

// GroupAllows reports whether a group message is for the bot: always under
// group_policy open, otherwise only when it addressed the bot (a mention, a
// reply to the bot, or a command meant for it).
func (a *Access) GroupAllows(addressed bool) bool {
	return a.groupPolicy == GroupOpen || addressed
}
