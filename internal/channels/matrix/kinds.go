package matrix

import (
	"strconv"
	"strings"

	"maunium.net/go/mautrix/event"

	"github.com/nanobot-go/nanobot/internal/channels"
)

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
	return nil
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
