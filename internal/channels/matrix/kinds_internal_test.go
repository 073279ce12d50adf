package matrix

import (
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
)

// TestEveryContentFieldIsAccounted: every field of the library's message
// content is in contentFields with a known fate and a reason, and the
// table names no field the type lacks.
func TestEveryContentFieldIsAccounted(t *testing.T) {
	typ := reflect.TypeFor[event.MessageEventContent]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fields[f.Name] = true
		entry, ok := contentFields[f.Name]
		switch {
		case !ok:
			t.Errorf("MessageEventContent.%s is not in contentFields: say what becomes of it", f.Name)
		case entry[1] == "":
			t.Errorf("contentFields[%q] gives no reason", f.Name)
		}
		switch entry[0] {
		case "routing", "text", "content", "context", "ignored", "":
		default:
			t.Errorf("contentFields[%q] = %q: not a known fate", f.Name, entry[0])
		}
	}
	for name := range contentFields {
		if !fields[name] {
			t.Errorf("contentFields names %q, which MessageEventContent has no more", name)
		}
	}
}

func TestItemsDescribeWhatIsNotFetched(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content event.MessageEventContent
		want    string
	}{
		{"location", event.MessageEventContent{MsgType: event.MsgLocation, Body: "Berlin", GeoURI: "geo:52.52,13.405;u=20"}, "[location: 52.52000, 13.40500]"},
		{"location without a geo uri", event.MessageEventContent{MsgType: event.MsgLocation, Body: "home"}, "[location: home]"},
		{"video", event.MessageEventContent{MsgType: event.MsgVideo, Body: "clip.mp4", Info: &event.FileInfo{Duration: 75000, Size: 2048}}, `[video: "clip.mp4", 1:15, 2 KiB]`},
		{"sticker", event.MessageEventContent{Body: "a happy cat", URL: "mxc://x/y"}, "[sticker: a happy cat]"},
		{"gallery", event.MessageEventContent{MsgType: event.MsgText, GalleryItems: []*event.MessageEventContent{
			{MsgType: event.MsgImage, Body: "a.png"}, {MsgType: event.MsgVideo, Body: "b.mp4"}}}, `[image: "a.png"] [video: "b.mp4"]`},
		{"text", event.MessageEventContent{MsgType: event.MsgText, Body: "hi"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, it := range items(&tc.content) {
				got = append(got, it.String())
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("items = %q, want %q", s, tc.want)
			}
		})
	}
}
