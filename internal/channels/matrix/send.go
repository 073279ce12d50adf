package matrix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Send posts one message, and its attachments as messages of their own
// after it (Matrix has one file per event); it returns the first one's id.
// A message in a thread stays in the thread; a reply points at the message
// it answers.
func (c *Channel) Send(ctx context.Context, m channels.Outgoing) (channels.Sent, error) {
	room := id.RoomID(m.ChatID)
	files, err := c.outboundFiles(m.Media)
	if err != nil {
		return channels.Sent{}, &channels.PermanentError{Err: fmt.Errorf("matrix: send to %s: %w", room, err)}
	}
	var sent channels.Sent
	if strings.TrimSpace(m.Text) != "" {
		content := rendered(m.Text)
		content.RelatesTo = relation(m)
		resp, err := c.cli.SendMessageEvent(ctx, room, event.EventMessage, &content)
		if err != nil {
			return channels.Sent{}, classify("send to "+room.String(), err)
		}
		sent = channels.Sent{ChatID: m.ChatID, MessageID: resp.EventID.String()}
	}
	for _, f := range files {
		id, err := c.sendFile(ctx, room, f, m, sent.MessageID == "")
		if err != nil {
			if sent.MessageID != "" {
				// The text went out: report the loss, not a retryable
				// failure that would post it again.
				return sent, &channels.PermanentError{Err: err}
			}
			return channels.Sent{}, err
		}
		if sent.MessageID == "" {
			sent = channels.Sent{ChatID: m.ChatID, MessageID: id}
		}
	}
	return sent, nil
}

// sendFile uploads one attachment and posts it as m.image or m.file.
func (c *Channel) sendFile(ctx context.Context, room id.RoomID, f upload, m channels.Outgoing, first bool) (string, error) {
	up, err := c.cli.UploadBytesWithName(ctx, f.data, f.mime, f.name)
	if err != nil {
		return "", classify("upload "+f.name, err)
	}
	content := event.MessageEventContent{MsgType: event.MsgFile, Body: f.name, FileName: f.name,
		URL: up.ContentURI.CUString(), Info: &event.FileInfo{MimeType: f.mime, Size: len(f.data)},
		Mentions: &event.Mentions{}}
	if isImage(f.mime) {
		content.MsgType = event.MsgImage
	}
	if first {
		content.RelatesTo = relation(m)
	} else if root := m.Metadata[MetaThreadID]; root != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetThread(id.EventID(root), "")
	}
	resp, err := c.cli.SendMessageEvent(ctx, room, event.EventMessage, &content)
	if err != nil {
		return "", classify("send "+f.name+" to "+room.String(), err)
	}
	return resp.EventID.String(), nil
}

// relation places a message: in its thread, answering the message it
// replies to.
func relation(m channels.Outgoing) *event.RelatesTo {
	root := m.Metadata[MetaThreadID]
	reply := id.EventID(channels.PlatformID(m.ReplyTo))
	switch {
	case root != "":
		rel := (&event.RelatesTo{}).SetThread(id.EventID(root), "")
		if reply != "" {
			rel.InReplyTo = &event.InReplyTo{EventID: reply}
		}
		return rel
	case reply != "":
		return (&event.RelatesTo{}).SetReplyTo(reply)
	}
	return nil
}

// rendered is the message for the agent's Markdown: HTML in formatted_body
// and the text in body. The model's raw HTML is escaped, and the message
// pings nobody (an empty m.mentions): what the model writes cannot summon
// a room. Drafts are rendered as well: Matrix never refuses the markup, so
// there is no plain fallback to keep apart.
func rendered(md string) event.MessageEventContent {
	content := format.RenderMarkdown(md, true, false)
	content.Mentions = &event.Mentions{}
	return content
}

// Edit replaces a sent message's text with an m.replace event; clients show
// the new content in place, and the short "* " body is the fallback for
// those that do not.
func (c *Channel) Edit(ctx context.Context, ref channels.Sent, text string, _ bool) error {
	nc := rendered(text)
	// The fallback is cut, as mautrix's own SetEdit does: the event carries
	// the text once more in m.new_content, and must stay under 64 KiB.
	fallback := nc.Body
	if r := []rune(fallback); len(r) > 100 {
		fallback = string(r[:50]) + "…"
	}
	edit := event.MessageEventContent{MsgType: nc.MsgType, Body: "* " + fallback, Mentions: &event.Mentions{}}
	edit.NewContent = &nc
	edit.RelatesTo = (&event.RelatesTo{}).SetReplace(id.EventID(ref.MessageID))
	if _, err := c.cli.SendMessageEvent(ctx, id.RoomID(ref.ChatID), event.EventMessage, &edit); err != nil {
		return classify("edit "+ref.MessageID, err)
	}
	return nil
}

// Delete redacts a sent message.
func (c *Channel) Delete(ctx context.Context, ref channels.Sent) error {
	if _, err := c.cli.RedactEvent(ctx, id.RoomID(ref.ChatID), id.EventID(ref.MessageID)); err != nil {
		return classify("redact "+ref.MessageID, err)
	}
	return nil
}

// typingTimeout is how long one typing notification lasts on the server.
const typingTimeout = 10 * time.Second

// Typing shows the bot typing in the room for typingTimeout.
func (c *Channel) Typing(ctx context.Context, chatID string, _ map[string]string) error {
	if _, err := c.cli.UserTyping(ctx, id.RoomID(chatID), true, typingTimeout); err != nil {
		return classify("typing in "+chatID, err)
	}
	return nil
}

// TypingInterval refreshes the notification before it runs out.
func (c *Channel) TypingInterval() time.Duration { return typingTimeout - 2*time.Second }

// classify wraps a failed call in the error that tells the manager what
// to do: M_LIMIT_EXCEEDED (or a bare 429) is a RateLimitError with the
// server's retry_after_ms; a refused token wraps ErrTokenRefused (and
// errFatal); other 4xx are permanent; a timeout after sending is an
// unknown outcome; anything else is transient.
func classify(op string, err error) error {
	wrapped := fmt.Errorf("matrix: %s: %w", op, err)
	var he mautrix.HTTPError
	if errors.As(err, &he) {
		code := 0
		if he.Response != nil {
			code = he.Response.StatusCode
		}
		if he.RespError != nil && code == 0 {
			code = he.RespError.StatusCode
		}
		switch {
		case errors.Is(err, mautrix.MLimitExceeded) || code == http.StatusTooManyRequests:
			return &channels.RateLimitError{RetryAfter: retryAfter(he), Err: wrapped}
		case errors.Is(err, mautrix.MUnknownToken) || code == http.StatusUnauthorized:
			return &channels.PermanentError{Err: fatal{fmt.Errorf("matrix: %s: %w (%w)", op, channels.ErrTokenRefused, err)}}
		case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
			return &channels.PermanentError{Err: wrapped}
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &channels.UnknownOutcomeError{Err: wrapped}
	}
	return wrapped
}

// retryAfter reads retry_after_ms from the error body, else the
// Retry-After header, else one second.
func retryAfter(he mautrix.HTTPError) time.Duration {
	if he.RespError != nil {
		switch v := he.RespError.ExtraData["retry_after_ms"].(type) {
		case float64:
			if v > 0 {
				return time.Duration(v) * time.Millisecond
			}
		}
	}
	if he.Response != nil {
		if s, err := strconv.Atoi(he.Response.Header.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return time.Second
}
