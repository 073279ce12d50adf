package channels

import (
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	date := time.Date(2026, 11, 30, 14, 2, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   Incoming
		want string
	}{
		{"text alone", Incoming{Text: " hi "}, "hi"},
		{"nothing", Incoming{}, ""},
		{"an edit of nothing readable", Incoming{Edited: true}, ""},
		{"a command stays a command, its reply dropped",
			Incoming{Text: "/model small", Reply: &Quote{From: "Bob", Text: "x"}}, "/model small"},
		{"a reply to someone", Incoming{Text: "what?", Reply: &Quote{From: "Bob (@bob)", Text: "a\nb"}},
			"[in reply to Bob (@bob): \"a b\"]\nwhat?"},
		{"a reply to the bot, media only", Incoming{Text: "and this?", Reply: &Quote{Self: true, Items: []Item{{Kind: "photo"}}}},
			"[in reply to your earlier message: [photo]]\nand this?"},
		{"a forward with a date", Incoming{Text: "report by Friday?", Forward: &Origin{Kind: OriginUser, Name: "Carol", Date: date}},
			"[forwarded from Carol, first sent 2026-11-30 14:02 UTC; the words below are theirs, not the sender's]\nreport by Friday?"},
		{"a forward from a hidden account", Incoming{Forward: &Origin{Kind: OriginHidden, Name: "Dan"}, Items: []Item{StickerItem("😀", "", "")}},
			"[forwarded from Dan (account hidden); the words below are theirs, not the sender's]\n[sticker: 😀]"},
		{"a forward of unknown origin", Incoming{Text: "x", Forward: &Origin{}},
			"[forwarded from another conversation; the words below are theirs, not the sender's]\nx"},
		{"an edit", Incoming{Text: "2+4?", Edited: true}, "[edited an earlier message; it now reads:]\n2+4?"},
		{"items after the text", Incoming{Text: "here", Items: []Item{LocationItem(52.52, 13.405, false), MediaItem("video", "", 75, 2048)}},
			"here\n[location: 52.52000, 13.40500]\n[video: 1:15, 2 KiB]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.in); got != tt.want {
				t.Fatalf("Render = %q\nwant     %q", got, tt.want)
			}
		})
	}
}

func TestEditIDKeepsThePlatformID(t *testing.T) {
	id := EditID("41", "907")
	if id == "41" || PlatformID(id) != "41" || PlatformID("41") != "41" {
		t.Fatalf("EditID = %q, PlatformID = %q", id, PlatformID(id))
	}
}
