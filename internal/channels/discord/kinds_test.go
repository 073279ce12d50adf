package discord_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

// kindCase is one kind of content a person can send, as the fake sends it
// over the gateway (MESSAGE_CREATE), and what the agent must read of it.
type kindCase struct {
	field string // the discordgo.Message field it fills
	// dm sends it in a direct message (a forward cannot mention the bot);
	// otherwise in a guild channel, after a mention of the bot.
	dm bool
	// make builds the message; earlier messages it needs (the one replied
	// to or forwarded) it posts itself where the bot is not addressed.
	make func(k *kinds) discordfake.Incoming
	// want is in the content the agent gets; media, when set, is the kind
	// of the one part it gets.
	want  string
	media llm.PartKind
}

// kinds is where the cases are sent.
type kinds struct {
	e           *env
	guildCh, dm string
	alice, bob  discordfake.User
}

var png = []byte("\x89PNG\r\n\x1a\nfake image bytes")

func invite(k *kinds) discordfake.Incoming {
	return discordfake.Incoming{Activity: &discordfake.Activity{Type: 1, PartyID: "p1"}, App: &discordfake.Application{ID: "9", Name: "Chess"}}
}

// kindCases holds a case for every content and context field of
// messageFields (TestEveryMessageFieldIsAccounted checks that it does).
var kindCases = []kindCase{
	{field: "Attachments", make: func(k *kinds) discordfake.Incoming {
		return discordfake.Incoming{Attachments: []discordfake.IncomingFile{{Name: "cat.png", ContentType: "image/png", Data: png}}}
	}, media: llm.PartImage},
	{field: "Embeds", make: func(k *kinds) discordfake.Incoming {
		return discordfake.Incoming{Embeds: []discordfake.Embed{{Type: "rich", Title: "Release notes", Description: "v2 is out", URL: "https://example.com/v2"}}}
	}, want: "[embed: Release notes — v2 is out https://example.com/v2]"},
	{field: "StickerItems", make: func(k *kinds) discordfake.Incoming {
		return discordfake.Incoming{Stickers: []discordfake.StickerItem{{ID: "5", Name: "Wave", FormatType: 1}}}
	}, want: `[sticker: "Wave"]`},
	{field: "Poll", make: func(k *kinds) discordfake.Incoming {
		return discordfake.Incoming{Poll: &discordfake.Poll{Question: discordfake.PollMedia{Text: "Lunch?"},
			Answers: []discordfake.PollAnswer{{AnswerID: 1, PollMedia: discordfake.PollMedia{Text: "pizza"}}, {AnswerID: 2, PollMedia: discordfake.PollMedia{Text: "soup"}}}}}
	}, want: `[poll: "Lunch?", options: pizza / soup]`},
	{field: "Activity", make: invite, want: "[activity invite: join Chess]"},
	{field: "Application", make: invite, want: "[activity invite: join Chess]"},
	{field: "ReferencedMessage", make: func(k *kinds) discordfake.Incoming {
		// "@bot translate this" as a reply to a friend's message.
		src := k.e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: k.guildCh, Author: k.bob, Content: "Kannst du mir den Bericht schicken?"})
		return discordfake.Incoming{Content: "translate this", ReplyTo: src}
	}, want: "[in reply to bob: \"Kannst du mir den Bericht schicken?\"]\ntranslate this"},
	{field: "MessageReference", dm: true, make: func(k *kinds) discordfake.Incoming {
		src := k.e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: k.guildCh, Author: k.bob, Content: "Can you send me the report by Friday?"})
		return discordfake.Incoming{Forward: src}
	}, want: "; the words below are theirs, not the sender's]\nCan you send me the report by Friday?"},
	{field: "MessageSnapshots", dm: true, make: func(k *kinds) discordfake.Incoming {
		src := k.e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: k.guildCh, Author: k.bob, Content: "the plan",
			Attachments: []discordfake.IncomingFile{{Name: "plan.png", ContentType: "image/png", Data: png}}})
		return discordfake.Incoming{Forward: src}
	}, want: "[forwarded from another conversation, first sent ", media: llm.PartImage},
}

// TestEveryMessageFieldIsAccounted walks discordgo.Message: a field the
// channel neither reads nor lists as ignored, with a reason, fails here.
func TestEveryMessageFieldIsAccounted(t *testing.T) {
	uses := discord.MessageFieldUses()
	typ := reflect.TypeFor[discordgo.Message]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		fields[name] = true
		use, ok := uses[name]
		if !ok {
			t.Errorf("discordgo.Message.%s (json %q) is neither handled nor ignored with a reason in messageFields",
				name, typ.Field(i).Tag.Get("json"))
			continue
		}
		if (use == "content" || use == "context") && !slices.ContainsFunc(kindCases, func(c kindCase) bool { return c.field == name }) {
			t.Errorf("discordgo.Message.%s is %s but kindCases does not send it", name, use)
		}
	}
	for name := range uses {
		if !fields[name] {
			t.Errorf("messageFields lists %s, which discordgo.Message no longer has", name)
		}
	}
}

func TestE2EEveryKindReachesTheAgent(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	g, ch, alice := e.guild()
	bob := e.fake.NewUser("bob")
	e.fake.AddMember(g, bob)
	k := &kinds{e: e, guildCh: ch, dm: e.fake.AddDM(alice), alice: alice, bob: bob}
	for _, c := range kindCases {
		t.Run(c.field, func(t *testing.T) {
			in := c.make(k)
			in.Author = alice
			if in.ChannelID = k.guildCh; c.dm {
				in.ChannelID = k.dm
			} else {
				in.Content = strings.TrimSpace(e.mention() + " " + in.Content)
			}
			e.fake.SendMessageCreate(in)
			var got bus.InboundMessage
			select {
			case got = <-e.got:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent got no message within 10s: the kind was dropped")
			}
			if got.SenderID != k.alice.ID || got.SenderName != k.alice.Username {
				t.Errorf("sender %s %q, want %s", got.SenderID, got.SenderName, k.alice.Username)
			}
			if c.media != "" && (len(got.Media) != 1 || got.Media[0].Kind != c.media) {
				t.Fatalf("media %+v, want one %s part", got.Media, c.media)
			}
			if !strings.Contains(got.Content, c.want) {
				t.Fatalf("content %q, want it to hold %q", got.Content, c.want)
			}
		})
	}
}

// A message in which nothing can be read is answered, not dropped in
// silence: here a bare mention.
func TestE2EUnreadableMessageIsAnswered(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	_, ch, carol := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: e.mention()})
	if got := e.fake.WaitMessages(t, ch, 1)[0]; !strings.Contains(got.Content, "nothing in it I can read") {
		t.Fatalf("notice %q", got.Content)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: e.mention() + " hi"})
	e.receivedIs("hi") // the bare mention never reached the agent
}

// An edit (MESSAGE_UPDATE with edited_timestamp) is a message of its own,
// read as a correction, in the thread's session, answered as a reply to
// the edited message; an update that only adds a link preview is none.
func TestE2EEditReachesTheAgentAsACorrection(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	_, ch, carol := e.guild()
	thread := e.fake.AddThread(ch, "maths")
	id := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: thread, Author: carol, Content: e.mention() + " what is 2+3? https://example.com"})
	first := e.receivedIs("what is 2+3? https://example.com")
	e.fake.AddLinkPreview(id, discordfake.Embed{Type: "link", Title: "Example", URL: "https://example.com"})
	e.fake.SendMessageUpdate(id, e.mention()+" what is 2+4?")
	edit := e.receivedIs("[edited an earlier message; it now reads:]\nwhat is 2+4?")
	if edit.Key() != first.Key() || edit.MessageID == first.MessageID {
		t.Fatalf("edit %q in %s, message %q in %s: want the same session, another id", edit.MessageID, edit.Key(), first.MessageID, first.Key())
	}
	if got := e.fake.WaitMessages(t, thread, 2)[1]; got.Reference == nil || got.Reference.MessageID != id {
		t.Fatalf("the answer to the edit %+v, want it replying to message %s", got, id)
	}
}
