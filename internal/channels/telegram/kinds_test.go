package telegram_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// kindCase is one kind of content a person can send, as the fake sends it
// over getUpdates, and what the agent must read of it.
type kindCase struct {
	field string // the models.Message field it fills
	set   func(e *env, m *models.Message)
	// want is in the content the agent gets; media, when set, is the kind
	// of the one part it gets; told, when set, is in the chat's reply
	// instead (nothing reaches the agent).
	want  string
	media llm.PartKind
	told  string
}

var forwardDate = time.Date(2026, 11, 30, 14, 2, 0, 0, time.UTC)

// kindCases holds a case for every content and context field of
// messageFields (TestEveryMessageFieldIsAccounted checks that it does).
var kindCases = []kindCase{
	{field: "Animation", set: func(_ *env, m *models.Message) {
		m.Animation = &models.Animation{FileID: "a", FileName: "cat.gif", Duration: 3}
	}, want: `[animation: "cat.gif", 0:03]`},
	{field: "Audio", set: func(_ *env, m *models.Message) {
		m.Audio = &models.Audio{FileID: "a", Performer: "Nina", Title: "Song", Duration: 185}
	}, want: `[audio: "Nina – Song", 3:05]`},
	{field: "Document", set: func(e *env, m *models.Message) {
		m.Document = &models.Document{FileID: e.srv.AddFile("docs/a.txt", []byte("notes")), FileName: "a.txt", FileSize: 5}
	}, media: llm.PartFileRef},
	{field: "PaidMedia", set: func(_ *env, m *models.Message) {
		m.PaidMedia = &models.PaidMediaInfo{StarCount: 50, PaidMedia: []models.PaidMedia{{Type: models.PaidMediaTypePreview, Preview: &models.PaidMediaPreview{}}}}
	}, want: "[paid media: 1 items for 50 stars"},
	{field: "Photo", set: func(e *env, m *models.Message) {
		m.Photo = []models.PhotoSize{{FileID: e.srv.AddFile("p/a.jpg", jpeg), Width: 10, Height: 10, FileSize: len(jpeg)}}
	}, media: llm.PartImage},
	{field: "Sticker", set: func(_ *env, m *models.Message) {
		m.Sticker = &models.Sticker{FileID: "s", Emoji: "😀", SetName: "Animals", Type: "regular"}
	}, want: "[sticker: 😀 from set Animals]"},
	{field: "Story", set: func(_ *env, m *models.Message) {
		m.Story = &models.Story{ID: 3, Chat: models.Chat{ID: 9, Type: models.ChatTypeChannel, Title: "News"}}
	}, want: "[story: from News]"},
	{field: "Video", set: func(_ *env, m *models.Message) {
		m.Video = &models.Video{FileID: "v", FileName: "clip.mp4", Duration: 12, Width: 1280, Height: 720}
	}, want: `[video: "clip.mp4", 0:12, 1280×720]`},
	{field: "VideoNote", set: func(_ *env, m *models.Message) {
		m.VideoNote = &models.VideoNote{FileID: "n", Duration: 7, Length: 240}
	}, want: "[video message: 0:07]"},
	{field: "Voice", set: func(_ *env, m *models.Message) {
		m.Voice = &models.Voice{FileID: "v", Duration: 2}
	}, told: "transcription is off"},
	{field: "Checklist", set: func(_ *env, m *models.Message) {
		m.Checklist = &models.Checklist{Title: "Trip", Tasks: []models.ChecklistTask{{ID: 1, Text: "tickets"}, {ID: 2, Text: "hotel"}}}
	}, want: `[checklist: "Trip": tickets / hotel]`},
	{field: "Contact", set: func(_ *env, m *models.Message) {
		m.Contact = &models.Contact{FirstName: "Ann", LastName: "Lee", PhoneNumber: "+4930123", UserID: 77}
	}, want: "[contact: Ann Lee, +4930123, user id 77]"},
	{field: "Dice", set: func(_ *env, m *models.Message) { m.Dice = &models.Dice{Emoji: "🎲", Value: 4} },
		want: "[dice: 🎲 rolled 4]"},
	{field: "Game", set: func(_ *env, m *models.Message) { m.Game = &models.Game{Title: "Chess"} }, want: "[game: Chess]"},
	{field: "Poll", set: func(_ *env, m *models.Message) {
		m.Poll = &models.Poll{ID: "p", Question: "Lunch?", Options: []models.PollOption{{Text: "pizza"}, {Text: "soup"}}, Type: "regular"}
	}, want: `[poll: "Lunch?", options: pizza / soup]`},
	{field: "Venue", set: func(_ *env, m *models.Message) {
		loc := models.Location{Latitude: 52.52, Longitude: 13.405}
		m.Venue, m.Location = &models.Venue{Title: "Cafe", Address: "Main St 1", Location: loc}, &loc
	}, want: "[venue: Cafe, Main St 1, (52.52000, 13.40500)]"},
	{field: "Location", set: func(_ *env, m *models.Message) {
		m.Location = &models.Location{Latitude: 52.52, Longitude: 13.405}
	}, want: "[location: 52.52000, 13.40500]"},
	{field: "Invoice", set: func(_ *env, m *models.Message) {
		m.Invoice = &models.Invoice{Title: "Tea", Currency: "EUR", TotalAmount: 350}
	}, want: `[invoice: "Tea", 350 EUR`},
	{field: "Giveaway", set: func(_ *env, m *models.Message) {
		m.Giveaway = &models.Giveaway{WinnerCount: 3, PrizeDescription: "mugs"}
	}, want: "[giveaway: 3 winners, prize: mugs]"},
	{field: "GiveawayWinners", set: func(_ *env, m *models.Message) {
		m.GiveawayWinners = &models.GiveawayWinners{WinnerCount: 2}
	}, want: "[giveaway winners: 2 winners]"},
	{field: "WebAppData", set: func(_ *env, m *models.Message) {
		m.WebAppData = &models.WebAppData{ButtonText: "Order", Data: "id=5"}
	}, want: `[web app data: Order: "id=5"]`},
	{field: "UsersShared", set: func(_ *env, m *models.Message) {
		m.UsersShared = &models.UsersShared{RequestID: 1, Users: []models.SharedUser{{UserID: 42}}}
	}, want: "[shared users: user ids 42]"},
	{field: "ChatShared", set: func(_ *env, m *models.Message) {
		m.ChatShared = &models.ChatShared{RequestID: 1, ChatID: -100, Title: "Team"}
	}, want: "[shared chat: Team, chat id -100]"},
	{field: "ReplyToMessage", set: func(_ *env, m *models.Message) {
		m.Text = "what does this mean?"
		m.ReplyToMessage = &models.Message{ID: 1, Chat: m.Chat, Text: "Can you send me the report by Friday?",
			From: &models.User{ID: 5, FirstName: "Bob", Username: "bob"}}
	}, want: "[in reply to Bob (@bob): \"Can you send me the report by Friday?\"]\nwhat does this mean?"},
	{field: "ExternalReply", set: func(_ *env, m *models.Message) {
		m.Text = "nice"
		m.ExternalReply = &models.ExternalReplyInfo{Photo: []models.PhotoSize{{FileID: "x"}},
			Origin: models.MessageOrigin{Type: models.MessageOriginTypeChannel, MessageOriginChannel: &models.MessageOriginChannel{
				Chat: models.Chat{ID: -9, Type: models.ChatTypeChannel, Title: "News"}, Date: 1}}}
	}, want: "[in reply to News: [photo]]\nnice"},
	{field: "Quote", set: func(_ *env, m *models.Message) {
		m.Text = "why?"
		m.ReplyToMessage = &models.Message{ID: 1, Chat: m.Chat, Text: "one. two. three.", From: &models.User{ID: 5, FirstName: "Bob"}}
		m.Quote = &models.TextQuote{Text: "two.", Position: 5}
	}, want: "[in reply to Bob: \"two.\"]\nwhy?"},
	{field: "ForwardOrigin", set: func(_ *env, m *models.Message) {
		m.Text = "Can you send me the report by Friday?"
		m.ForwardOrigin = &models.MessageOrigin{Type: models.MessageOriginTypeUser, MessageOriginUser: &models.MessageOriginUser{
			Date: int(forwardDate.Unix()), SenderUser: models.User{ID: 8, FirstName: "Carol", Username: "carol"}}}
	}, want: "[forwarded from Carol (@carol), first sent 2026-11-30 14:02 UTC; the words below are theirs, not the sender's]\n" +
		"Can you send me the report by Friday?"},
}

// TestEveryMessageFieldIsAccounted walks models.Message: a field the
// channel neither reads nor lists as ignored, with a reason, fails here, so
// a new Bot API version cannot bring silence back.
func TestEveryMessageFieldIsAccounted(t *testing.T) {
	uses := telegram.MessageFieldUses()
	typ := reflect.TypeFor[models.Message]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		fields[name] = true
		use, ok := uses[name]
		if !ok {
			t.Errorf("models.Message.%s (json %q) is neither handled nor ignored with a reason in messageFields",
				name, typ.Field(i).Tag.Get("json"))
			continue
		}
		if (use == "content" || use == "context") && !slices.ContainsFunc(kindCases, func(c kindCase) bool { return c.field == name }) {
			t.Errorf("models.Message.%s is %s but kindCases does not send it", name, use)
		}
	}
	for name := range uses {
		if !fields[name] {
			t.Errorf("messageFields lists %s, which models.Message no longer has", name)
		}
	}
}

// TestEveryContentKindReachesTheAgent sends each kind over the fake's
// getUpdates and reads what the agent got: nothing is silent.
func TestEveryContentKindReachesTheAgent(t *testing.T) {
	e := start(t, opts{})
	for _, c := range kindCases {
		t.Run(c.field, func(t *testing.T) {
			m := telegramfake.DM(owner, "")
			c.set(e, &m)
			before, replies := len(e.agent.received()), len(e.srv.Visible(owner))
			id := e.srv.PushMessage(m)
			e.waitAcked(t, id)
			if c.told != "" {
				// The echo of an earlier case may still arrive after the
				// count was taken: look for the notice among all that came
				// since, not only at the first place.
				e.srv.Wait(t, "the notice "+c.told, func() bool {
					return slices.ContainsFunc(e.srv.Visible(owner)[replies:], func(v string) bool { return strings.Contains(v, c.told) })
				})
				return
			}
			got := e.agent.received()
			if len(got) != before+1 {
				t.Fatalf("the agent got %d messages, want 1", len(got)-before)
			}
			in := got[before]
			if in.SenderName != "User (@user100)" {
				t.Errorf("sender %q, want the display name and @username", in.SenderName)
			}
			if c.media != "" && (len(in.Media) != 1 || in.Media[0].Kind != c.media) {
				t.Fatalf("media %+v, want one %s part", in.Media, c.media)
			}
			if !strings.Contains(in.Content, c.want) {
				t.Fatalf("content %q, want it to hold %q", in.Content, c.want)
			}
		})
	}
}

func TestServiceMessageIsNotAnswered(t *testing.T) {
	e := start(t, opts{})
	m := telegramfake.DM(owner, "")
	m.PinnedMessage = &models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeMessage, Message: &models.Message{ID: 1, Chat: m.Chat}}
	e.waitAcked(t, e.srv.PushMessage(m))
	e.srv.PushMessage(telegramfake.DM(owner, "hi"))
	e.srv.Wait(t, "the answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if got := e.agent.received(); len(got) != 1 || got[0].Content != "hi" {
		t.Fatalf("agent got %+v; the pin should not reach it", got)
	}
}

// A message in which nothing can be read is answered, not dropped in
// silence: here a bare mention in a group.
func TestUnreadableMessageIsAnswered(t *testing.T) {
	e := start(t, opts{})
	const chat = -600
	e.srv.PushMessage(telegramfake.Mention(chat, owner, ""))
	e.srv.Wait(t, "the notice", func() bool { return len(e.srv.Visible(chat)) == 1 })
	if got := e.srv.Visible(chat)[0]; !strings.Contains(got, "nothing in it I can read") {
		t.Fatalf("notice %q", got)
	}
	if n := len(e.agent.received()); n != 0 {
		t.Fatalf("agent got %d messages", n)
	}
}

// An edit is a message of its own: the agent reads it as a correction, and
// the answer replies to the edited message. A live location moving is no
// edit anyone made.
func TestEditReachesTheAgentAsACorrection(t *testing.T) {
	e := start(t, opts{})
	orig := telegramfake.DM(owner, "what is 2+3?")
	orig.ID = 41
	e.srv.PushMessage(orig)
	e.srv.Wait(t, "the first answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	live := telegramfake.DM(owner, "")
	live.ID = 42
	live.Location = &models.Location{Latitude: 1, Longitude: 2, LivePeriod: 60}
	e.waitAcked(t, e.srv.PushEdit(live))
	edit := orig
	edit.Text = "what is 2+4?"
	upd := e.srv.PushEdit(edit)
	e.srv.Wait(t, "the second answer", func() bool { return len(e.srv.Visible(owner)) == 2 })
	got := e.agent.received()
	if len(got) != 2 {
		t.Fatalf("agent got %d messages, want the message and its edit", len(got))
	}
	if want := "[edited an earlier message; it now reads:]\nwhat is 2+4?"; got[1].Content != want {
		t.Fatalf("edit reads %q, want %q", got[1].Content, want)
	}
	if got[1].MessageID == got[0].MessageID {
		t.Fatalf("the edit has the message's id %q: the agent would take it for a redelivery", got[1].MessageID)
	}
	if sent := e.srv.Sent(owner)[1]; sent.ReplyTo != 41 {
		t.Fatalf("the answer to the edit replies to %d, want 41", sent.ReplyTo)
	}
	e.waitAcked(t, upd)
}

// An album held back to collect its parts is not overtaken by the message
// sent after it.
func TestAlbumIsNotOvertaken(t *testing.T) {
	e := start(t, opts{})
	for i := range 2 {
		m := telegramfake.DM(owner, "")
		m.MediaGroupID = "album2"
		if i == 0 {
			m.Caption = "the album"
		}
		m.Photo = []models.PhotoSize{{FileID: e.srv.AddFile("p/x.jpg", jpeg), Width: 10, Height: 10}}
		e.srv.PushMessage(m)
	}
	e.srv.PushMessage(telegramfake.DM(owner, "after the album"))
	e.srv.Wait(t, "both answers", func() bool { return len(e.agent.received()) == 2 })
	var order []string
	for _, m := range e.agent.received() {
		order = append(order, m.Content)
	}
	if !slices.Equal(order, []string{"the album", "after the album"}) {
		t.Fatalf("the agent read %q, want the album first", order)
	}
}
