package matrix

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// handleEvent turns one timeline event into an Arrival for the intake. It
// reports whether the event is dealt with (published, or deliberately
// dropped); false means the bus refused it (shutting down), and the next
// start fetches it again.
func (c *Channel) handleEvent(ctx context.Context, evt *event.Event, more bool) bool {
	if evt.Sender != c.bot && evt.Type.Type == event.EventEncrypted.Type {
		c.encrypted(ctx, evt)
		return true
	}
	if !c.isMessage(evt) {
		return true
	}
	evt.Type.Class = event.MessageEventType
	if err := evt.Content.ParseRaw(evt.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		c.log.Debug("matrix event not parsed", zap.String("event", evt.ID.String()), zap.Error(err))
		return true
	}
	content := evt.Content.AsMessage()
	if content.MsgType == event.MsgNotice || content.MsgType == event.MsgVerificationRequest {
		return true // notices are what bots send; verification is for E2EE
	}
	a, ok := c.arrival(ctx, evt, content)
	if !ok {
		return true
	}
	a.Msg.More = more
	// Held until answered (or dropped by the intake, which acknowledges
	// it): saved with the sync position, so a crash mid-turn hands it
	// over again at the next start (resume) instead of losing the answer.
	room, eventID := evt.RoomID.String(), evt.ID.String()
	if old, dropped := c.state.hold(room, eventID); dropped {
		c.log.Warn("too many unanswered messages kept; the oldest will not be handed over again after a restart",
			zap.String("room", old.Room), zap.String("event", old.Event))
	}
	// An Ack inside Admit (a message dropped, or answered at once) needs
	// no save of its own: the sync loop saves after the batch.
	var admitting atomic.Bool
	admitting.Store(true)
	a.Msg.Ack = func() { c.answered(eventID, !admitting.Load()) }
	verdict, err := c.intake.Admit(ctx, a)
	admitting.Store(false)
	if errors.Is(err, context.Canceled) || (err != nil && ctx.Err() != nil) {
		c.log.Info("inbound message not handed over: shutting down", zap.String("event", evt.ID.String()))
		return false
	} else if err != nil {
		c.log.Warn("inbound message not delivered to the agent", zap.String("event", evt.ID.String()), zap.Error(err))
		return false
	}
	if verdict == channels.Published {
		// The read receipt says the bot has it; a failure only leaves the
		// message unread in clients.
		if err := c.cli.MarkRead(ctx, evt.RoomID, evt.ID); err != nil {
			c.log.Debug("read receipt not sent", zap.String("event", evt.ID.String()), zap.Error(err))
		}
	}
	return true
}

// stateSaveTimeout bounds a save of the sync state off the sync loop (a
// KV bucket over the network when scaled out).
const stateSaveTimeout = 10 * time.Second

// answered drops a message from those to hand over again and saves that,
// so a restart does not send its answer a second time.
func (c *Channel) answered(eventID string, save bool) {
	if !c.state.answered(eventID) || !save {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateSaveTimeout)
	defer cancel()
	if err := c.state.save(ctx); err != nil {
		c.log.Warn("matrix state not saved after an answer; a crash now sends that answer again", zap.Error(err))
	}
}

// arrival builds the intake's Arrival for a message event: routing, group
// gating, what was said, and the media to fetch after the gate.
func (c *Channel) arrival(ctx context.Context, evt *event.Event, content *event.MessageEventContent) (channels.Arrival, bool) {
	room := evt.RoomID
	msgID := evt.ID.String()
	edited := false
	rel := content.RelatesTo
	if orig := rel.GetReplaceID(); orig != "" {
		// An edit is a message of its own (docs/channels.md#edited-messages):
		// the new content, under the id of the message it edits.
		if content.NewContent == nil {
			return channels.Arrival{}, false
		}
		msgID = channels.EditID(orig.String(), evt.ID.String())
		edited = true
		content = content.NewContent
	}
	info, err := c.roomInfo(ctx, room)
	if err != nil {
		c.log.Warn("room members not read; treating it as a group", zap.String("room", room.String()), zap.Error(err))
	}
	in := bus.InboundMessage{
		Channel:    Name,
		SenderID:   evt.Sender.String(),
		SenderName: senderName(evt.Sender, info.members[evt.Sender]),
		ChatID:     room.String(),
		MessageID:  msgID,
		Time:       time.UnixMilli(evt.Timestamp),
		Metadata:   map[string]string{"is_group": "false"},
	}
	a := channels.Arrival{Msg: in, Username: sender(evt.Sender).Username}
	root := rel.GetThreadParent()
	if edited {
		root = c.editedThread(ctx, room, rel.GetReplaceID())
	}
	if root != "" {
		in.Metadata[MetaThreadID] = root.String()
		a.Msg.SessionKey = SessionKey(channels.Chat{ID: room.String(), Metadata: map[string]string{MetaThreadID: root.String()}})
	}
	if info.members == nil || !info.isDM() {
		a.Group = true
		a.Msg.Metadata["is_group"] = "true"
	}
	content.RemoveReplyFallback()
	text := messageText(content)
	var quote *channels.Quote
	replyToBot := false
	if to := rel.GetNonFallbackReplyTo(); to != "" && !edited {
		quote, replyToBot = c.quote(ctx, room, to, info)
	}
	if a.Group {
		mentioned := c.mentioned(content, info)
		a.Addressed = mentioned || replyToBot
		if mentioned {
			text = c.stripMention(text, info)
		}
	}
	a.Said = said(content, text, quote, edited)
	if !edited && isMedia(content) {
		a.Prepare = func(ctx context.Context, msg *bus.InboundMessage) error {
			return c.prepare(ctx, evt, content, msg)
		}
	}
	return a, true
}

// editedThread is the thread of the message an edit replaces (the edit's
// own relation is the replacement), so the correction reaches the thread's
// session; "" when it is in none or cannot be fetched.
func (c *Channel) editedThread(ctx context.Context, room id.RoomID, orig id.EventID) id.EventID {
	evt, err := c.cli.GetEvent(ctx, room, orig)
	if err != nil {
		c.log.Debug("edited event not fetched; the edit goes to the room's session", zap.String("event", orig.String()), zap.Error(err))
		return ""
	}
	if err := evt.Content.ParseRaw(event.EventMessage); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		return ""
	}
	return evt.Content.AsMessage().RelatesTo.GetThreadParent()
}

// messageText is what the sender typed: the body of a text, an emote as
// "* name does", a caption of a file (a body other than the file name).
func messageText(content *event.MessageEventContent) string {
	switch content.MsgType {
	case event.MsgText, event.MsgEmote, "":
		if content.MsgType == event.MsgEmote {
			return "* " + content.Body
		}
		return content.Body
	case event.MsgAudio:
		if content.MSC3245Voice != nil {
			return "" // "Voice message" is a client's label, not a caption
		}
		return content.GetCaption()
	case event.MsgImage, event.MsgVideo, event.MsgFile:
		return content.GetCaption()
	}
	return ""
}

// quote fetches the message a reply answers, and reports whether it is the
// bot's own. A message that cannot be fetched is quoted without its text.
func (c *Channel) quote(ctx context.Context, room id.RoomID, to id.EventID, info roomInfo) (*channels.Quote, bool) {
	evt, err := c.cli.GetEvent(ctx, room, to)
	if err != nil {
		c.log.Debug("replied-to event not fetched", zap.String("event", to.String()), zap.Error(err))
		return &channels.Quote{From: "an earlier message"}, false
	}
	_ = evt.Content.ParseRaw(evt.Type)
	q := &channels.Quote{From: senderName(evt.Sender, info.members[evt.Sender]), Self: evt.Sender == c.bot}
	if m := evt.Content.AsMessage(); m != nil {
		if m.NewContent != nil {
			m = m.NewContent
		}
		m.RemoveReplyFallback()
		q.Text = messageText(m)
		q.Items = items(m)
	}
	return q, q.Self
}

// mentioned reports whether a group message is addressed to the bot: its
// user id in the intentional mentions (m.mentions), a pill linking to it in
// the formatted body, or its user id or display name in the text.
func (c *Channel) mentioned(content *event.MessageEventContent, info roomInfo) bool {
	if content.Mentions != nil && slices.Contains(content.Mentions.UserIDs, c.bot) {
		return true
	}
	if strings.Contains(content.FormattedBody, "matrix.to/#/"+c.bot.String()) ||
		strings.Contains(content.FormattedBody, "matrix.to/#/"+strings.ReplaceAll(c.bot.String(), ":", "%3A")) {
		return true
	}
	if strings.Contains(content.Body, c.bot.String()) {
		return true
	}
	for _, name := range c.names(info) {
		if mentionsName(content.Body, name) {
			return true
		}
	}
	return false
}

// names are the names the bot goes by here: its room display name and its
// global one.
func (c *Channel) names(info roomInfo) []string {
	var out []string
	if n := strings.TrimSpace(info.members[c.bot]); n != "" {
		out = append(out, n)
	}
	if p := c.displayName.Load(); p != nil && strings.TrimSpace(*p) != "" && !slices.Contains(out, *p) {
		out = append(out, strings.TrimSpace(*p))
	}
	return out
}

// mentionsName reports whether text names the bot as a word (clients
// write a pill as the plain display name in the body).
func mentionsName(text, name string) bool {
	re, err := regexp.Compile(`(?i)(^|[^\pL\pN_])@?` + regexp.QuoteMeta(name) + `($|[^\pL\pN_])`)
	return err == nil && re.MatchString(text)
}

// stripMention removes the bot's mention from the text: its user id or a
// name at the start (with the ":" or "," clients add), or elsewhere.
func (c *Channel) stripMention(text string, info roomInfo) string {
	for _, n := range append([]string{c.bot.String()}, c.names(info)...) {
		re := regexp.MustCompile(`(?i)^\s*@?` + regexp.QuoteMeta(n) + `\s*[:,]?\s*`)
		if loc := re.FindStringIndex(text); loc != nil {
			return strings.TrimSpace(text[loc[1]:])
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(text, c.bot.String(), ""))
}

// sender is who wrote a message, for the access policy. A Matrix user id
// starts with "@", which allow_from reads as a username: the id without
// it is given as the username, so "@ann:example.org" in allow_from
// matches Ann (and so does "*", or her id under pairing).
func sender(u id.UserID) channels.Sender {
	return channels.Sender{ID: u.String(), Username: strings.TrimPrefix(u.String(), "@")}
}

// senderName is how the sender is shown to the model: the display name
// people see and the user id, which stays put ("Ann (@ann:example.org)").
func senderName(u id.UserID, display string) string {
	display = strings.TrimSpace(display)
	if display == "" || display == u.String() {
		return u.String()
	}
	return display + " (" + u.String() + ")"
}

// encrypted tells a room once that its encrypted messages are not read:
// end-to-end encryption is not linked into nanobot (docs/matrix.md).
func (c *Channel) encrypted(ctx context.Context, evt *event.Event) {
	ok, err := c.access.Allowed(sender(evt.Sender))
	if err != nil || !ok || !c.state.tell(evt.RoomID.String()) {
		return
	}
	_, err = c.Send(ctx, channels.Outgoing{ChatID: evt.RoomID.String(), Text: encryptedNotice})
	if err != nil {
		c.log.Warn("encrypted room not told it is not read", zap.String("room", evt.RoomID.String()), zap.Error(err))
	}
}

const encryptedNotice = "This room is end-to-end encrypted, and I cannot read encrypted messages. " +
	"Talk to me in a room without encryption."
