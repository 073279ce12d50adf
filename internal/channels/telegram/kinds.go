package telegram

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// use says what the channel does with one field of models.Message.
type use int

const (
	// useRouting: who sent it, where, which message; read by arrival,
	// addressed, the album collector or the edit handling.
	useRouting use = iota
	// useText: the text or caption, or what it marks up.
	useText
	// useContent: something the sender sent, which becomes an image or
	// file_ref part or a transcript (media.go), or an Item (items).
	useContent
	// useContext: a reply's quoted message or a forward's origin.
	useContext
	// useService: a service message (a member joined, a title changed, a
	// payment went through): nobody said anything, so it is not answered.
	useService
	// useIgnored: presentation or bookkeeping the model has no use for.
	useIgnored
)

// field is one row of messageFields: what the field is used for and why.
type field struct {
	use use
	why string
}

// messageFields says, for every field of models.Message, what becomes of
// it. TestEveryMessageFieldIsAccounted fails on a field of the
// library's type missing here, so a new Bot API kind cannot be dropped in
// silence; TestEveryContentKindReachesTheAgent sends each useContent and
// useContext field through the fake and reads what the agent got.
var messageFields = map[string]field{
	"ID":                            {useRouting, "the message id: dedupe, replies, the journal"},
	"MessageThreadID":               {useRouting, "a forum topic's own session"},
	"IsTopicMessage":                {useRouting, "marks MessageThreadID as a forum topic"},
	"From":                          {useRouting, "the sender: id, display name, username"},
	"SenderChat":                    {useRouting, "posted on behalf of a chat (channel posts, anonymous admins): not a person, not answered"},
	"Date":                          {useRouting, "when it was sent: the agent's late note"},
	"EditDate":                      {useRouting, "an edit's time (edited_message updates)"},
	"Chat":                          {useRouting, "where replies go; private or group"},
	"MediaGroupID":                  {useRouting, "an album's parts are collected into one message"},
	"Text":                          {useText, "the text"},
	"Entities":                      {useText, "mentions and commands addressing the bot"},
	"Caption":                       {useText, "a media message's text"},
	"CaptionEntities":               {useText, "mentions and commands in a caption"},
	"ReplyToMessage":                {useContext, "the quoted message of a reply"},
	"ExternalReply":                 {useContext, "a reply to a message in another chat"},
	"Quote":                         {useContext, "the part of the replied-to message the sender quoted"},
	"ForwardOrigin":                 {useContext, "who first wrote a forwarded message"},
	"Animation":                     {useContent, "described; its thumbnail as an image part"},
	"Audio":                         {useContent, "transcribed when transcription is on, else described"},
	"Document":                      {useContent, "saved under inbox/ as a file_ref part"},
	"PaidMedia":                     {useContent, "described (the media itself is paid for, not sent)"},
	"Photo":                         {useContent, "the largest size that fits as an image part"},
	"Sticker":                       {useContent, "described: emoji and set"},
	"Story":                         {useContent, "described: whose story"},
	"Video":                         {useContent, "described: name, length, size; its thumbnail as an image part"},
	"VideoNote":                     {useContent, "described: length; its thumbnail as an image part"},
	"Voice":                         {useContent, "transcribed when transcription is on, else the sender is told"},
	"Checklist":                     {useContent, "described: title and tasks"},
	"Contact":                       {useContent, "described: name, phone, user id"},
	"Dice":                          {useContent, "described: emoji and value"},
	"Game":                          {useContent, "described: title"},
	"Poll":                          {useContent, "described: question and options"},
	"Venue":                         {useContent, "described: name, address, coordinates"},
	"Location":                      {useContent, "described: coordinates"},
	"Invoice":                       {useContent, "described: title and amount"},
	"Giveaway":                      {useContent, "described: prize and winner count"},
	"GiveawayWinners":               {useContent, "described: winner count"},
	"WebAppData":                    {useContent, "described: the data a web app sent"},
	"UsersShared":                   {useContent, "described: the shared users' ids"},
	"ChatShared":                    {useContent, "described: the shared chat"},
	"ReplyToStore":                  {useIgnored, "the library tags it reply_to_store, a misspelling of the Bot API's reply_to_story, so it is never filled"},
	"ReplyToChecklistTaskID":        {useIgnored, "a task of a checklist the bot never sends"},
	"DirectMessagesTopic":           {useIgnored, "a channel's direct-messages topic; the chat id already routes the reply"},
	"SenderBoostCount":              {useIgnored, "how often the sender boosted the group"},
	"SenderBusinessBot":             {useIgnored, "business accounts are not served (no business_message updates)"},
	"BusinessConnectionID":          {useIgnored, "business accounts are not served (no business_message updates)"},
	"IsAutomaticForward":            {useIgnored, "a channel post copied into its discussion group: posted by a chat, dropped with SenderChat"},
	"ViaBot":                        {useIgnored, "the inline bot that made the message; its content is read as the message's own"},
	"HasProtectedContent":           {useIgnored, "forwarding restrictions; the bot does not forward"},
	"IsFromOffline":                 {useIgnored, "sent by a scheduled or away message; the content is read as usual"},
	"IsPaidPost":                    {useIgnored, "a paid channel post; channel posts are not answered"},
	"AuthorSignature":               {useIgnored, "a channel post's or anonymous admin's signature; those are not answered"},
	"PaidStarCount":                 {useIgnored, "stars the sender paid to send it"},
	"LinkPreviewOptions":            {useIgnored, "how a link preview is shown; the link is in the text"},
	"SuggestedPostInfo":             {useIgnored, "channel post suggestions are not served"},
	"EffectID":                      {useIgnored, "a visual effect"},
	"ShowCaptionAboveMedia":         {useIgnored, "layout"},
	"HasMediaSpoiler":               {useIgnored, "the media is blurred until tapped; it is still read"},
	"ReplyMarkup":                   {useIgnored, "inline keyboards are sent by bots, not people"},
	"NewChatMembers":                {useService, "members joined"},
	"LeftChatMember":                {useService, "a member left"},
	"NewChatTitle":                  {useService, "the title changed"},
	"NewChatPhoto":                  {useService, "the photo changed"},
	"DeleteChatPhoto":               {useService, "the photo was removed"},
	"GroupChatCreated":              {useService, "the group was created"},
	"SupergroupChatCreated":         {useService, "the supergroup was created"},
	"ChannelChatCreated":            {useService, "the channel was created"},
	"MessageAutoDeleteTimerChanged": {useService, "the auto-delete timer changed"},
	"MigrateToChatID":               {useService, "the group became a supergroup"},
	"MigrateFromChatID":             {useService, "the supergroup was a group"},
	"PinnedMessage":                 {useService, "a message was pinned"},
	"SuccessfulPayment":             {useService, "a payment went through (the bot sells nothing)"},
	"RefundedPayment":               {useService, "a payment was refunded"},
	"Gift":                          {useService, "a gift was sent"},
	"UniqueGift":                    {useService, "a unique gift was sent"},
	"GiftUpgradeSent":               {useService, "a gift upgrade was sent"},
	"ConnectedWebsite":              {useService, "the user logged in on a website through the bot"},
	"WriteAccessAllowed":            {useService, "the user allowed the bot to write"},
	"PassportData":                  {useService, "Telegram Passport data, which the bot never requests"},
	"ProximityAlertTriggered":       {useService, "a live location came near another"},
	"BoostAdded":                    {useService, "the group was boosted"},
	"ChatBackgroundSet":             {useService, "the background changed"},
	"ChecklistTasksDone":            {useService, "checklist tasks were ticked"},
	"ChecklistTasksAdded":           {useService, "checklist tasks were added"},
	"DirectMessagePriceChanged":     {useService, "the price of direct messages changed"},
	"ForumTopicCreated":             {useService, "a topic was created"},
	"ForumTopicEdited":              {useService, "a topic was edited"},
	"ForumTopicClosed":              {useService, "a topic was closed"},
	"ForumTopicReopened":            {useService, "a topic was reopened"},
	"GeneralForumTopicHidden":       {useService, "the General topic was hidden"},
	"GeneralForumTopicUnhidden":     {useService, "the General topic was shown"},
	"GiveawayCreated":               {useService, "a giveaway was scheduled"},
	"GiveawayCompleted":             {useService, "a giveaway ended"},
	"PaidMessagePriceChanged":       {useService, "the price of messages changed"},
	"ChatOwnerLeft":                 {useService, "the owner left"},
	"ChatOwnerChanged":              {useService, "the owner changed"},
	"SuggestedPostApproved":         {useService, "a suggested post was approved"},
	"SuggestedPostApprovalFailed":   {useService, "a suggested post failed"},
	"SuggestedPostDeclined":         {useService, "a suggested post was declined"},
	"SuggestedPostPaid":             {useService, "a suggested post was paid"},
	"SuggestedPostRefunded":         {useService, "a suggested post was refunded"},
	"VoiceChatScheduled":            {useService, "a voice chat was scheduled"},
	"VoiceChatStarted":              {useService, "a voice chat started"},
	"VoiceChatEnded":                {useService, "a voice chat ended"},
	"VoiceChatParticipantsInvited":  {useService, "people were invited to a voice chat"},
}

// serviceFields are the indices of the useService fields, found once.
var serviceFields = sync.OnceValue(func() []int {
	var idx []int
	t := reflect.TypeFor[models.Message]()
	for i := range t.NumField() {
		if f, ok := messageFields[t.Field(i).Name]; ok && f.use == useService {
			idx = append(idx, i)
		}
	}
	return idx
})

// isService reports whether m is a service message: it says that something
// happened in the chat rather than carrying anything a person wrote.
func isService(m *models.Message) bool {
	v := reflect.ValueOf(m).Elem()
	for _, i := range serviceFields() {
		if !v.Field(i).IsZero() {
			return true
		}
	}
	return false
}

// said is what the sender of msgs (one message, or an album's parts)
// wrote, for channels.Render. Photos, documents, voice and audio are left
// to Prepare (media.go) unless describe is set (an edit, which fetches
// nothing again), when they are described too.
func said(msgs []*models.Message, me *models.User, describe bool) *channels.Incoming {
	first := msgs[0]
	in := &channels.Incoming{Forward: origin(first.ForwardOrigin), Edited: first.EditDate != 0}
	var texts []string
	for _, m := range msgs {
		if t := messageText(m, me); t != "" {
			texts = append(texts, t)
		}
		in.Items = append(in.Items, items(m, describe)...)
	}
	in.Text = strings.Join(texts, "\n\n")
	in.Reply = quote(first, me)
	return in
}

// quote is the message first replies to: the one in this chat, or one in
// another chat (external_reply), narrowed to the part the sender quoted.
func quote(m *models.Message, me *models.User) *channels.Quote {
	var q *channels.Quote
	switch r, x := m.ReplyToMessage, m.ExternalReply; {
	case r != nil && m.IsTopicMessage && r.ID == m.MessageThreadID:
		// In a forum topic every message "replies" to the topic's first
		// message; that is no reply the sender made.
		return nil
	case r != nil:
		q = &channels.Quote{Text: r.Text, Items: items(r, true)}
		if r.Text == "" {
			q.Text = r.Caption
		}
		switch {
		case r.From != nil && me != nil && r.From.ID == me.ID:
			q.Self = true
		case r.From != nil:
			q.From = displayName(r.From)
		case r.SenderChat != nil:
			q.From = chatName(*r.SenderChat)
		}
	case x != nil:
		q = &channels.Quote{Items: items(externalMessage(x), true)}
		if o := origin(&x.Origin); o != nil {
			q.From = o.Name
		}
	default:
		return nil
	}
	if m.Quote != nil && m.Quote.Text != "" {
		q.Text = m.Quote.Text
	}
	return q
}

// externalMessage carries an external reply's contents in a Message, so
// items describes them like any other.
func externalMessage(x *models.ExternalReplyInfo) *models.Message {
	return &models.Message{
		Animation: x.Animation, Audio: x.Audio, Document: x.Document, PaidMedia: x.PaidMedia, Photo: x.Photo,
		Sticker: x.Sticker, Story: x.Story, Video: x.Video, VideoNote: x.VideoNote, Voice: x.Voice,
		Checklist: x.Checklist, Contact: x.Contact, Dice: x.Dice, Game: x.Game, Giveaway: x.Giveaway,
		GiveawayWinners: x.GiveawayWinners, Invoice: x.Invoice, Location: x.Location, Poll: x.Poll, Venue: x.Venue,
	}
}

// origin is who first wrote a forwarded message.
func origin(o *models.MessageOrigin) *channels.Origin {
	if o == nil {
		return nil
	}
	switch {
	case o.MessageOriginUser != nil:
		u := o.MessageOriginUser
		return &channels.Origin{Kind: channels.OriginUser, Name: displayName(&u.SenderUser), Date: unix(u.Date)}
	case o.MessageOriginHiddenUser != nil:
		u := o.MessageOriginHiddenUser
		return &channels.Origin{Kind: channels.OriginHidden, Name: u.SenderUserName, Date: unix(u.Date)}
	case o.MessageOriginChat != nil:
		c := o.MessageOriginChat
		return &channels.Origin{Kind: channels.OriginChat, Name: chatName(c.SenderChat), Date: unix(c.Date)}
	case o.MessageOriginChannel != nil:
		c := o.MessageOriginChannel
		return &channels.Origin{Kind: channels.OriginChannel, Name: chatName(c.Chat), Date: unix(c.Date)}
	}
	return nil
}

func unix(sec int) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(int64(sec), 0).UTC()
}

// displayName is a user's name and @username, as much as Telegram gives.
func displayName(u *models.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	switch {
	case u.Username == "":
		return name
	case name == "":
		return "@" + u.Username
	}
	return name + " (@" + u.Username + ")"
}

func chatName(c models.Chat) string {
	name := c.Title
	if name == "" {
		name = strings.TrimSpace(c.FirstName + " " + c.LastName)
	}
	if c.Username != "" {
		name = strings.TrimSpace(name + " (@" + c.Username + ")")
	}
	return name
}

// items describes m's contents other than text. Photos, documents, voice
// and audio are fetched by Prepare instead, unless describe is set.
func items(m *models.Message, describe bool) []channels.Item {
	var out []channels.Item
	add := func(it channels.Item) { out = append(out, it) }
	if describe {
		if len(m.Photo) > 0 {
			add(channels.Item{Kind: "photo"})
		}
		if d := m.Document; d != nil {
			add(channels.MediaItem("file", d.FileName, 0, d.FileSize))
		}
		if v := m.Voice; v != nil {
			add(channels.MediaItem("voice message", "", v.Duration, v.FileSize))
		}
		if a := m.Audio; a != nil {
			add(audioItem(a))
		}
	}
	if a := m.Animation; a != nil {
		add(channels.MediaItem("animation", a.FileName, a.Duration, a.FileSize))
	}
	if v := m.Video; v != nil {
		it := channels.MediaItem("video", v.FileName, v.Duration, v.FileSize)
		if v.Width > 0 && v.Height > 0 {
			it.Detail = strings.TrimPrefix(it.Detail+fmt.Sprintf(", %d×%d", v.Width, v.Height), ", ")
		}
		add(it)
	}
	if v := m.VideoNote; v != nil {
		add(channels.MediaItem("video message", "", v.Duration, int64(v.FileSize)))
	}
	if p := m.PaidMedia; p != nil {
		add(channels.Item{Kind: "paid media", Detail: fmt.Sprintf("%d items for %d stars, not shown until paid", len(p.PaidMedia), p.StarCount)})
	}
	if s := m.Sticker; s != nil {
		add(channels.StickerItem(s.Emoji, "", s.SetName))
	}
	if s := m.Story; s != nil {
		add(channels.Item{Kind: "story", Detail: "from " + chatName(s.Chat)})
	}
	if c := m.Checklist; c != nil {
		var tasks []string
		for _, t := range c.Tasks {
			tasks = append(tasks, t.Text)
		}
		add(channels.Item{Kind: "checklist", Detail: fmt.Sprintf("%q: %s", c.Title, strings.Join(tasks, " / "))})
	}
	if c := m.Contact; c != nil {
		id := ""
		if c.UserID != 0 {
			id = strconv.FormatInt(c.UserID, 10)
		}
		add(channels.ContactItem(strings.TrimSpace(c.FirstName+" "+c.LastName), c.PhoneNumber, id))
	}
	if d := m.Dice; d != nil {
		add(channels.DiceItem(d.Emoji, d.Value))
	}
	if g := m.Game; g != nil {
		add(channels.Item{Kind: "game", Detail: g.Title})
	}
	if p := m.Poll; p != nil {
		var opts []string
		for _, o := range p.Options {
			opts = append(opts, o.Text)
		}
		add(channels.PollItem(p.Question, opts))
	}
	switch {
	case m.Venue != nil:
		// A venue carries its location too; one item says both.
		v := m.Venue
		add(channels.VenueItem(v.Title, v.Address, v.Location.Latitude, v.Location.Longitude))
	case m.Location != nil:
		l := m.Location
		add(channels.LocationItem(l.Latitude, l.Longitude, l.LivePeriod > 0))
	}
	if i := m.Invoice; i != nil {
		add(channels.Item{Kind: "invoice", Detail: fmt.Sprintf("%q, %d %s in the currency's smallest unit", i.Title, i.TotalAmount, i.Currency)})
	}
	if g := m.Giveaway; g != nil {
		add(channels.Item{Kind: "giveaway", Detail: fmt.Sprintf("%d winners, prize: %s", g.WinnerCount, g.PrizeDescription)})
	}
	if g := m.GiveawayWinners; g != nil {
		add(channels.Item{Kind: "giveaway winners", Detail: fmt.Sprintf("%d winners", g.WinnerCount)})
	}
	if w := m.WebAppData; w != nil {
		add(channels.Item{Kind: "web app data", Detail: fmt.Sprintf("%s: %q", w.ButtonText, w.Data)})
	}
	if u := m.UsersShared; u != nil {
		var ids []string
		for _, s := range u.Users {
			ids = append(ids, strconv.FormatInt(s.UserID, 10))
		}
		add(channels.Item{Kind: "shared users", Detail: "user ids " + strings.Join(ids, ", ")})
	}
	if c := m.ChatShared; c != nil {
		add(channels.Item{Kind: "shared chat", Detail: channelsJoin(c.Title, "chat id "+strconv.FormatInt(c.ChatID, 10))})
	}
	return out
}

func audioItem(a *models.Audio) channels.Item {
	name := a.FileName
	if a.Title != "" {
		name = strings.TrimSpace(a.Performer + " – " + a.Title)
		name = strings.TrimPrefix(name, "– ")
	}
	return channels.MediaItem("audio", name, a.Duration, a.FileSize)
}

func channelsJoin(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}
