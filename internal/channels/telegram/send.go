package telegram

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// TypingInterval is how often Telegram's typing indicator must be renewed
// (it shows for about five seconds).
func (c *Channel) TypingInterval() time.Duration { return 4 * time.Second }

// Send delivers one message: text (HTML unless Plain) or, when m.Media is
// set, each attachment as a photo or document.
func (c *Channel) Send(ctx context.Context, m channels.Outgoing) (channels.Sent, error) {
	chat, err := strconv.ParseInt(m.ChatID, 10, 64)
	if err != nil {
		return channels.Sent{}, &channels.PermanentError{Err: fmt.Errorf("telegram send: chat id %q is not numeric", m.ChatID)}
	}
	thread := threadID(m.Metadata)
	var reply *models.ReplyParameters
	if id, err := strconv.Atoi(m.ReplyTo); err == nil && id > 0 {
		reply = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
	}
	if len(m.Media) > 0 {
		return c.sendMedia(ctx, chat, thread, reply, m.Media)
	}
	p := &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: m.Text, ReplyParameters: reply}
	if !m.Plain {
		p.ParseMode = models.ParseModeHTML
	}
	msg, err := c.api.SendMessage(ctx, p)
	if err != nil {
		return channels.Sent{}, mapError("sendMessage", err)
	}
	return channels.Sent{ChatID: m.ChatID, MessageID: strconv.Itoa(msg.ID)}, nil
}

// Edit replaces a sent message's text.
func (c *Channel) Edit(ctx context.Context, ref channels.Sent, text string, plain bool) error {
	chat, err1 := strconv.ParseInt(ref.ChatID, 10, 64)
	id, err2 := strconv.Atoi(ref.MessageID)
	if err1 != nil || err2 != nil {
		return &channels.PermanentError{Err: fmt.Errorf("telegram edit: bad message reference %+v", ref)}
	}
	p := &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: text}
	if !plain {
		p.ParseMode = models.ParseModeHTML
	}
	_, err := c.api.EditMessageText(ctx, p)
	return mapError("editMessageText", err)
}

// Delete removes a sent message.
func (c *Channel) Delete(ctx context.Context, ref channels.Sent) error {
	chat, err1 := strconv.ParseInt(ref.ChatID, 10, 64)
	id, err2 := strconv.Atoi(ref.MessageID)
	if err1 != nil || err2 != nil {
		return &channels.PermanentError{Err: fmt.Errorf("telegram delete: bad message reference %+v", ref)}
	}
	_, err := c.api.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chat, MessageID: id})
	return mapError("deleteMessage", err)
}

// Typing shows "typing…" in the chat (and topic) for about five seconds.
func (c *Channel) Typing(ctx context.Context, chatID string, metadata map[string]string) error {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		return &channels.PermanentError{Err: fmt.Errorf("telegram typing: chat id %q is not numeric", chatID)}
	}
	_, err = c.api.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chat, MessageThreadID: threadID(metadata), Action: models.ChatActionTyping})
	return mapError("sendChatAction", err)
}

func threadID(meta map[string]string) int {
	id, _ := strconv.Atoi(meta[MetaThreadID])
	return id
}

// sendMedia uploads each attachment: images as photos, anything else as a
// document. Paths are relative to the workspace and must stay inside it.
func (c *Channel) sendMedia(ctx context.Context, chat int64, thread int, reply *models.ReplyParameters, parts []llm.Part) (channels.Sent, error) {
	var last channels.Sent
	for i, p := range parts {
		name, data, isImage, err := c.mediaBytes(p, i)
		if err != nil {
			return last, &channels.PermanentError{Err: fmt.Errorf("telegram send media %d: %w", i, err)}
		}
		upload := &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}
		var msg *models.Message
		if isImage {
			msg, err = c.api.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload, ReplyParameters: reply})
			err = mapError("sendPhoto", err)
		} else {
			msg, err = c.api.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload, ReplyParameters: reply})
			err = mapError("sendDocument", err)
		}
		if err != nil {
			return last, err
		}
		reply = nil
		last = channels.Sent{ChatID: strconv.FormatInt(chat, 10), MessageID: strconv.Itoa(msg.ID)}
	}
	return last, nil
}

// mediaBytes reads what a part attaches (channels.UploadOf: inside the
// workspace, never sessions/, nothing over Telegram's limit read).
func (c *Channel) mediaBytes(p llm.Part, i int) (name string, data []byte, image bool, err error) {
	u, ok, err := channels.UploadOf(p, i, c.deps.Workspace, maxUploadBytes)
	switch {
	case err != nil:
		return "", nil, false, err
	case !ok && p.Kind == llm.PartImage:
		return "", nil, false, fmt.Errorf("image part has neither data nor a path (URLs are not uploaded)")
	case !ok:
		return "", nil, false, fmt.Errorf("part of kind %q cannot be sent", p.Kind)
	}
	return u.Name, u.Data, u.Image, nil
}

// maxUploadBytes is Telegram's upload limit for a bot.
const maxUploadBytes = 50 << 20

func extFor(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	}
	return ".jpg"
}
