package matrix

import (
	"strconv"
	"strings"

	"maunium.net/go/mautrix/event"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// contentFields says, for every field of mautrix's MessageEventContent (the
// content of m.room.message and m.sticker), what becomes of it
// (docs/channels.md#what-each-message-kind-becomes), with the reason.
// TestEveryContentFieldIsAccounted holds the table to the library's type,
// so a field a new mautrix brings fails until it is placed here.
var contentFields = map[string][2]string{
	"MsgType":       {"routing", "text, emote, notice (a bot's: not answered), image, audio, file, video, location"},
	"Body":          {"text", "the text; a media message's caption when it differs from the file name"},
	"Format":        {"text", "org.matrix.custom.html: the formatted body is read for mention pills"},
	"FormattedBody": {"text", "read for a pill linking to the bot; the plain body is what the model reads"},
	"GeoURI":        {"content", "a location: [location: lat, lon]"},
	"URL":           {"content", "the mxc:// media, fetched after the gate (images, voice, files)"},
	"Info":          {"content", "mime type, size (checked against max_media_bytes), duration"},
	"File":          {"content", "an encrypted attachment: noted as unreadable (no E2EE)"},
	"FileName":      {"content", "the file's name, kept in the saved file's name"},
	"GalleryItems":  {"content", "each item described"},
	"NewContent":    {"context", "an edit's new version, read as a correction"},
	"RelatesTo":     {"context", "replies (quoted), threads (own session), edits (m.replace)"},
	"Mentions":      {"routing", "m.mentions naming the bot addresses it in a room"},

	"UnstableGalleryItemType":      {"ignored", "an unstable gallery's; the stable items are read"},
	"UnstableGalleryItems":         {"ignored", "an unstable gallery's; the stable items are read"},
	"To":                           {"ignored", "in-room verification, which is for E2EE"},
	"FromDevice":                   {"ignored", "in-room verification, which is for E2EE"},
	"Methods":                      {"ignored", "in-room verification, which is for E2EE"},
	"ImageSourcePacks":             {"ignored", "custom emoji packs of a Beeper client"},
	"BridgedEmojis":                {"ignored", "emoji images a bridge adds; the text keeps the emoji"},
	"MessageSendRetry":             {"ignored", "a bridge's retry bookkeeping"},
	"BeeperPerMessageProfile":      {"ignored", "a bridged sender's name; the sender is the Matrix user"},
	"BeeperActionMessage":          {"ignored", "a bridge's action notice, not something a person typed"},
	"BeeperLinkPreviews":           {"ignored", "previews of links that are in the text"},
	"BeeperStream":                 {"ignored", "a bridge's streaming bookkeeping"},
	"BeeperDisappearingTimer":      {"ignored", "a disappearing-message timer; the message is read once anyway"},
	"BeeperViewLimited":            {"ignored", "view-once media of a bridge"},
	"BeeperBroadcastOutsideThread": {"ignored", "a display hint of a bridge"},
	"MSC1767Audio":                 {"content", "an audio's duration; the file is fetched"},
	"MSC3245Voice":                 {"content", "marks a voice message: transcribed"},
	"MSC4391BotCommand":            {"ignored", "a structured bot command (unstable); the body holds the command as typed"},
}

// said is what the sender wrote, for channels.Render: the text (mention
// stripped), the message it answers, and the contents that are described
// rather than fetched. Images, voice and files are fetched by Prepare
// (media.go) unless the message is an edit, which fetches nothing again.
func said(content *event.MessageEventContent, text string, quote *channels.Quote, edited bool) *channels.Incoming {
	in := &channels.Incoming{Text: strings.TrimSpace(text), Reply: quote, Edited: edited}
	if edited || !isMedia(content) {
		in.Items = items(content)
	}
	return in
}

// isMedia reports a message whose content Prepare fetches.
func isMedia(content *event.MessageEventContent) bool {
	switch content.MsgType {
	case event.MsgImage, event.MsgAudio, event.MsgFile:
		return content.URL != "" || content.File != nil
	}
	return false
}

// items describes a message's contents other than text, as a fact the
// model can use: where a location is, what a video or a file was.
func items(content *event.MessageEventContent) []channels.Item {
	info := content.GetInfo()
	switch content.MsgType {
	case event.MsgLocation:
		if lat, lon, ok := geoURI(content.GeoURI); ok {
			return []channels.Item{channels.LocationItem(lat, lon, false)}
		}
		return []channels.Item{{Kind: "location", Detail: content.Body}}
	case event.MsgVideo:
		return []channels.Item{channels.MediaItem("video", content.GetFileName(), info.Duration/1000, int64(info.Size))}
	case event.MsgImage:
		return []channels.Item{channels.MediaItem("image", content.GetFileName(), 0, int64(info.Size))}
	case event.MsgAudio:
		kind := "audio"
		if content.MSC3245Voice != nil {
			kind = "voice message"
		}
		return []channels.Item{channels.MediaItem(kind, content.GetFileName(), info.Duration/1000, int64(info.Size))}
	case event.MsgFile:
		return []channels.Item{channels.MediaItem("file", content.GetFileName(), 0, int64(info.Size))}
	case "": // a sticker (m.sticker has no msgtype)
		if content.URL != "" {
			return []channels.Item{channels.StickerItem("", content.Body, "")}
		}
	}
	var out []channels.Item
	for _, g := range content.GalleryItems {
		if g != nil {
			out = append(out, items(g)...)
		}
	}
	return out
}

// geoURI reads "geo:52.52,13.40;u=10".
func geoURI(s string) (lat, lon float64, ok bool) {
	s, found := strings.CutPrefix(s, "geo:")
	if !found {
		return 0, 0, false
	}
	s, _, _ = strings.Cut(s, ";")
	a, b, found := strings.Cut(s, ",")
	if !found {
		return 0, 0, false
	}
	lat, err1 := strconv.ParseFloat(a, 64)
	lon, err2 := strconv.ParseFloat(b, 64)
	return lat, lon, err1 == nil && err2 == nil
}
