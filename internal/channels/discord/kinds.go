package discord

import (
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// messageFields says, for every field of discordgo.Message, what becomes of
// it (docs/channels.md#what-each-message-kind-becomes), with the reason:
// "routing" and "text" fields are read by
// inbound.go, "content" and "context" ones become parts (media.go) or
// Items and quotes (below), "ignored" ones carry nothing a person said to
// the bot. TestEveryMessageFieldIsAccounted holds the table to the
// library's type, so a field a new discordgo brings fails until it is
// placed here; TestE2EEveryKindReachesTheAgent sends the content and context
// kinds through the fake.
var messageFields = map[string][2]string{
	"ID":                  {"routing", "dedupe, replies, cursors"},
	"ChannelID":           {"routing", "the chat; a thread's own session"},
	"GuildID":             {"routing", "guild gating"},
	"Content":             {"text", "the text, mentions resolved"},
	"Timestamp":           {"routing", "when it was sent: the agent's late note"},
	"EditedTimestamp":     {"routing", "set on an edit (MESSAGE_UPDATE); unset on an update that only added link previews"},
	"MentionRoles":        {"routing", "a mention of the bot's role addresses it"},
	"Author":              {"routing", "the sender; bots and system users are not answered"},
	"Mentions":            {"text", "a mention of the bot addresses it; other users' mentions read as @name"},
	"Type":                {"routing", "only ordinary messages and replies are a person's"},
	"WebhookID":           {"routing", "webhook posts are not a person's"},
	"Member":              {"routing", "the sender's nickname and roles"},
	"Flags":               {"routing", "IS_VOICE_MESSAGE: an attachment to transcribe"},
	"Attachments":         {"content", "images as image parts, voice transcribed, other files saved as file_ref parts"},
	"Embeds":              {"content", "rich embeds (a forwarded bot message's) described: title, description, link; link previews are of a link in the text"},
	"StickerItems":        {"content", "described: the sticker's name"},
	"Poll":                {"content", "described: question and answers"},
	"Activity":            {"content", "described: an invitation to join an activity"},
	"Application":         {"content", "names the activity's application"},
	"MessageReference":    {"context", "a reply's or a forward's reference"},
	"ReferencedMessage":   {"context", "the quoted message of a reply"},
	"MessageSnapshots":    {"context", "a forwarded message's content"},
	"TTS":                 {"ignored", "clients read it aloud; the text is the same"},
	"MentionEveryone":     {"ignored", "@everyone is in the text"},
	"Components":          {"ignored", "buttons and menus, which only bots and apps send"},
	"Reactions":           {"ignored", "reactions arrive as their own events, which the bot does not ask for"},
	"Pinned":              {"ignored", "pinning is not something said"},
	"MentionChannels":     {"ignored", "set only on a crosspost from another server's announcement channel, posted by no person here"},
	"Interaction":         {"ignored", "set on a bot's answer to a slash command, never on a person's message"},
	"InteractionMetadata": {"ignored", "set on a bot's answer to a slash command, never on a person's message"},
	"Thread":              {"ignored", "the thread started from this message: its messages come with the thread's channel id, in their own session"},
}

// said is what the sender of m wrote, for channels.Render; text is its
// content with mentions resolved. Attachments are left to Prepare
// (media.go) unless describe is set (an edit, which fetches nothing again).
func said(m *discordgo.Message, text, bot string, describe bool) *channels.Incoming {
	in := &channels.Incoming{Text: text, Items: items(m, describe), Edited: m.EditedTimestamp != nil}
	if r := m.MessageReference; r != nil && r.Type == discordgo.MessageReferenceTypeForward {
		in.Forward = &channels.Origin{Kind: channels.OriginUser}
		for _, s := range m.MessageSnapshots {
			if f := s.Message; f != nil {
				in.Forward.Date = f.Timestamp
				in.Text = strings.TrimSpace(in.Text + "\n" + replaceMentions(f.Content, f.Mentions))
				in.Items = append(in.Items, items(f, describe)...)
			}
		}
		return in
	}
	if ref := m.ReferencedMessage; ref != nil && ref.Author != nil {
		q := &channels.Quote{From: displayName(ref.Author, ref.Member), Self: ref.Author.ID == bot,
			Text: replaceMentions(ref.Content, ref.Mentions), Items: items(ref, true)}
		in.Reply = q
	}
	return in
}

// items describes m's contents other than text. Attachments are fetched by
// Prepare instead, unless describe is set.
func items(m *discordgo.Message, describe bool) []channels.Item {
	var out []channels.Item
	if describe {
		for _, a := range m.Attachments {
			if a == nil {
				continue
			}
			kind := "file"
			switch mt := attachmentMIME(a); {
			case m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0:
				kind = "voice message"
			case isImage(mt):
				kind = "image"
			case strings.HasPrefix(mt, "video/"):
				kind = "video"
			case strings.HasPrefix(mt, "audio/"):
				kind = "audio"
			}
			out = append(out, channels.MediaItem(kind, a.Filename, int(a.DurationSecs), int64(a.Size)))
		}
	}
	for _, s := range m.StickerItems {
		if s != nil {
			out = append(out, channels.StickerItem("", fmt.Sprintf("%q", s.Name), ""))
		}
	}
	for _, e := range m.Embeds {
		if e == nil || (e.Type != "" && e.Type != discordgo.EmbedTypeRich) {
			continue // a preview Discord made of a link that is in the text
		}
		d := strings.TrimSpace(e.Title)
		if desc := strings.Join(strings.Fields(e.Description), " "); desc != "" {
			if r := []rune(desc); len(r) > 200 {
				desc = string(r[:200]) + "…"
			}
			d = strings.TrimPrefix(d+" — "+desc, " — ")
		}
		if e.URL != "" {
			d = strings.TrimSpace(d + " " + e.URL)
		}
		if d != "" {
			out = append(out, channels.Item{Kind: "embed", Detail: d})
		}
	}
	if p := m.Poll; p != nil {
		var answers []string
		for _, a := range p.Answers {
			if a.Media != nil {
				answers = append(answers, a.Media.Text)
			}
		}
		out = append(out, channels.PollItem(p.Question.Text, answers))
	}
	if a := m.Activity; a != nil {
		what := map[discordgo.MessageActivityType]string{discordgo.MessageActivityTypeJoin: "join",
			discordgo.MessageActivityTypeSpectate: "spectate", discordgo.MessageActivityTypeListen: "listen along",
			discordgo.MessageActivityTypeJoinRequest: "asks to join"}[a.Type]
		if m.Application != nil && m.Application.Name != "" {
			what = strings.TrimSpace(what + " " + m.Application.Name)
		}
		out = append(out, channels.Item{Kind: "activity invite", Detail: what})
	}
	return out
}
