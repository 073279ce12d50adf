package channels

import (
	"fmt"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/commands"
)

// Incoming is one message as its sender wrote it, in words no platform owns.
// Each adapter maps its platform's message into it (the Telegram and Discord
// adapters' kinds.go, each with a table a reflection test holds to the
// library's message type), and Render is the one place that writes it for
// the model, so a reply, a forward or a sticker reads the same whichever
// transport carried it (docs/channels.md#what-each-message-kind-becomes).
// Images, files and voice are not described here: the adapters fetch them
// after the gate (Arrival.Prepare) as image and file_ref parts or a
// transcript.
type Incoming struct {
	// Text is what the sender typed, or a caption, the bot's own mention
	// removed.
	Text string
	// Reply is the message this one answers; nil when it answers none.
	Reply *Quote
	// Forward is where a forwarded message was first written; Text and
	// Items are then the forwarded content, not the sender's own words.
	Forward *Origin
	// Items are the contents that are not text, described, in the order
	// the platform lists them.
	Items []Item
	// Edited marks a new version of a message sent earlier
	// (docs/channels.md#edited-messages).
	Edited bool
}

// Quote is the message a reply answers.
type Quote struct {
	// From names its author (display name or @username); ignored when Self.
	From string
	// Self is set when it is one of the bot's own messages.
	Self bool
	// Text is its text or caption, Items its other contents.
	Text  string
	Items []Item
}

// OriginKind says who first wrote a forwarded message.
type OriginKind string

const (
	OriginUser    OriginKind = "user"    // a user the platform names
	OriginHidden  OriginKind = "hidden"  // a user who hides their account: a name only
	OriginChat    OriginKind = "chat"    // a group, on behalf of itself
	OriginChannel OriginKind = "channel" // a broadcast channel's post
)

// Origin is where a forwarded message came from.
type Origin struct {
	Kind OriginKind
	// Name is the author's or the chat's name as the platform shows it;
	// empty when the platform does not say (a Discord forward).
	Name string
	// Date is when it was first written; zero when unknown.
	Date time.Time
}

// Item is one non-text content of a message as a short fact the model can
// use: Kind is what it is ("location", "sticker"), Detail the facts that
// matter ("52.52, 13.40"). The constructors below are shared by the
// adapters so one kind reads alike everywhere.
type Item struct {
	Kind   string
	Detail string
}

func (i Item) String() string {
	if i.Detail == "" {
		return "[" + i.Kind + "]"
	}
	return "[" + i.Kind + ": " + i.Detail + "]"
}

// LocationItem is a point on the map; live marks a location shared live.
func LocationItem(lat, lon float64, live bool) Item {
	kind := "location"
	if live {
		kind = "live location"
	}
	return Item{Kind: kind, Detail: fmt.Sprintf("%.5f, %.5f", lat, lon)}
}

// VenueItem is a named place.
func VenueItem(title, address string, lat, lon float64) Item {
	return Item{Kind: "venue", Detail: join(", ", title, address, fmt.Sprintf("(%.5f, %.5f)", lat, lon))}
}

// ContactItem is a shared contact card.
func ContactItem(name, phone, userID string) Item {
	if userID != "" {
		userID = "user id " + userID
	}
	return Item{Kind: "contact", Detail: join(", ", name, phone, userID)}
}

// StickerItem is a sticker: its emoji, its name, the set it is from.
func StickerItem(emoji, name, set string) Item {
	d := join(" ", emoji, name)
	if set != "" {
		d = join(" ", d, "from set "+set)
	}
	return Item{Kind: "sticker", Detail: d}
}

// DiceItem is an animated die or game of chance and what it showed.
func DiceItem(emoji string, value int) Item {
	return Item{Kind: "dice", Detail: fmt.Sprintf("%s rolled %d", emoji, value)}
}

// PollItem is a poll with its options.
func PollItem(question string, options []string) Item {
	return Item{Kind: "poll", Detail: fmt.Sprintf("%q, options: %s", question, strings.Join(options, " / "))}
}

// MediaItem is a file-like content that is described rather than fetched
// (a video, an animation, a video note, an audio file without a transcript):
// kind, its file name, its length and its size when the platform says.
func MediaItem(kind, name string, seconds int, bytes int64) Item {
	var facts []string
	if name != "" {
		facts = append(facts, fmt.Sprintf("%q", name))
	}
	if seconds > 0 {
		facts = append(facts, fmt.Sprintf("%d:%02d", seconds/60, seconds%60))
	}
	if bytes > 0 {
		facts = append(facts, fmt.Sprintf("%d KiB", (bytes+1023)/1024))
	}
	return Item{Kind: kind, Detail: strings.Join(facts, ", ")}
}

// quoteRunes caps a quoted message: enough to know what is answered.
const quoteRunes = 300

// Render writes in for the model: who a forward came from and what a reply
// answers, then the text, then the other contents, one per line. A command
// ("/new", "/model x") is left as typed, so the agent still reads it as one.
// An empty result means nothing in the message could be read.
func Render(in Incoming) string {
	text := strings.TrimSpace(in.Text)
	if _, _, ok := commands.Parse(text); ok && !in.Edited && in.Forward == nil {
		return text
	}
	var lines []string
	if in.Edited {
		lines = append(lines, "[edited an earlier message; it now reads:]")
	}
	if o := in.Forward; o != nil {
		lines = append(lines, "[forwarded "+originText(*o)+"; the words below are theirs, not the sender's]")
	}
	if q := in.Reply; q != nil {
		who := q.From
		if q.Self {
			who = "your earlier message"
		}
		body := items(q.Items)
		if t := oneLine(q.Text, quoteRunes); t != "" {
			body = join(" ", body, fmt.Sprintf("%q", t))
		}
		lines = append(lines, "[in reply to "+join(": ", who, body)+"]")
	}
	if text != "" {
		lines = append(lines, text)
	}
	for _, it := range in.Items {
		lines = append(lines, it.String())
	}
	if len(lines) == 0 || (len(lines) == 1 && in.Edited) {
		return ""
	}
	return strings.Join(lines, "\n")
}

func originText(o Origin) string {
	var s string
	switch o.Kind {
	case OriginChannel:
		s = "from the channel " + o.Name
	case OriginChat:
		s = "from the group " + o.Name
	case OriginHidden:
		s = "from " + o.Name + " (account hidden)"
	default:
		s = "from " + o.Name
	}
	if o.Name == "" {
		s = "from another conversation"
	}
	if !o.Date.IsZero() {
		s += ", first sent " + o.Date.UTC().Format("2006-01-02 15:04 MST")
	}
	return s
}

func items(list []Item) string {
	var parts []string
	for _, it := range list {
		parts = append(parts, it.String())
	}
	return strings.Join(parts, " ")
}

// oneLine is s on one line, cut to at most n runes with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// join joins the non-empty strings of parts with sep.
func join(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// editSep separates a message's platform id from an edit's version in the
// MessageID an edit travels with: an edit is a message of its own to the
// agent (deduped, recorded and answered on its own), and replies to it still
// point at the platform message that was edited (PlatformID).
const editSep = "~edit:"

// EditID is the MessageID of version version of the message id.
func EditID(id, version string) string { return id + editSep + version }

// PlatformID is the platform's message id inside a MessageID: for an edit,
// the message it edited.
func PlatformID(id string) string {
	id, _, _ = strings.Cut(id, editSep)
	return id
}
