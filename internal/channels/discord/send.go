package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// maxFilesPerMessage is Discord's limit of attachments on one message.
const maxFilesPerMessage = 10

// userChatPrefix marks a ChatID that names a user rather than a channel
// ("user:<id>"); Send opens (and remembers) the DM channel.
const userChatPrefix = "user:"

// allowedMentions is sent with every message and edit: nobody is pinged by
// what the model writes (no @everyone/@here, no roles, no users), only the
// author of the message being replied to, as Discord's own reply does.
func allowedMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: true}
}

// Send posts one message (with up to ten attachments; more go in follow-up
// messages) and returns the first one's id.
func (c *Channel) Send(ctx context.Context, m channels.Outgoing) (channels.Sent, error) {
	chatID, err := c.resolveChat(ctx, m.ChatID)
	if err != nil {
		return channels.Sent{}, err
	}
	files, err := c.outboundFiles(m.Media)
	if err != nil {
		return channels.Sent{}, &channels.PermanentError{Err: fmt.Errorf("discord: send to %s: %w", chatID, err)}
	}
	text := m.Text
	for _, u := range imageURLs(m.Media) {
		text = strings.TrimSpace(text + "\n" + u)
	}
	first := min(len(files), maxFilesPerMessage)
	ms := &discordgo.MessageSend{Content: text, AllowedMentions: allowedMentions(), Files: files[:first]}
	if m.ReplyTo != "" {
		noFail := false // the user may have deleted their message; answer anyway
		ms.Reference = &discordgo.MessageReference{MessageID: m.ReplyTo, ChannelID: chatID, FailIfNotExists: &noFail}
	}
	msg, err := c.sess.ChannelMessageSendComplex(chatID, ms, discordgo.WithContext(ctx))
	if err != nil {
		return channels.Sent{}, classify("send to "+chatID, err)
	}
	sent := channels.Sent{ChatID: chatID, MessageID: msg.ID}
	for rest := files[first:]; len(rest) > 0; {
		n := min(len(rest), maxFilesPerMessage)
		more := &discordgo.MessageSend{AllowedMentions: allowedMentions(), Files: rest[:n]}
		if _, err := c.sess.ChannelMessageSendComplex(chatID, more, discordgo.WithContext(ctx)); err != nil {
			// The first message went out: report the loss, not a retryable
			// failure that would post it again.
			return sent, &channels.PermanentError{Err: classify("send attachments to "+chatID, err)}
		}
		rest = rest[n:]
	}
	return sent, nil
}

// Edit replaces a sent message's text. Discord answers an edit to the same
// text with success, so ErrNotModified never comes up.
func (c *Channel) Edit(ctx context.Context, ref channels.Sent, text string, _ bool) error {
	e := &discordgo.MessageEdit{ID: ref.MessageID, Channel: ref.ChatID, Content: &text, AllowedMentions: allowedMentions()}
	if _, err := c.sess.ChannelMessageEditComplex(e, discordgo.WithContext(ctx)); err != nil {
		return classify("edit "+ref.ChatID+"/"+ref.MessageID, err)
	}
	return nil
}

// Delete removes a sent message; one already gone counts as deleted.
func (c *Channel) Delete(ctx context.Context, ref channels.Sent) error {
	err := c.sess.ChannelMessageDelete(ref.ChatID, ref.MessageID, discordgo.WithContext(ctx))
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil && re.Message.Code == discordgo.ErrCodeUnknownMessage {
		return nil
	}
	if err != nil {
		return classify("delete "+ref.ChatID+"/"+ref.MessageID, err)
	}
	return nil
}

// Typing shows "nanobot is typing..." for about ten seconds.
func (c *Channel) Typing(ctx context.Context, chatID string, _ map[string]string) error {
	id, err := c.resolveChat(ctx, chatID)
	if err != nil {
		return err
	}
	if err := c.sess.ChannelTyping(id, discordgo.WithContext(ctx)); err != nil {
		return classify("typing in "+id, err)
	}
	return nil
}

// TypingInterval refreshes the indicator before Discord's ~10 s run out.
func (c *Channel) TypingInterval() time.Duration { return 8 * time.Second }

// classify wraps a REST failure in the error type that tells the manager
// what to do: RateLimitError and UnknownOutcomeError come from the
// transport as they are; a 4xx is permanent; anything else is transient.
func classify(op string, err error) error {
	var rl *channels.RateLimitError
	var uo *channels.UnknownOutcomeError
	if errors.As(err, &rl) || errors.As(err, &uo) {
		return fmt.Errorf("discord: %s: %w", op, err)
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		if code >= 400 && code < 500 && code != http.StatusRequestTimeout {
			return &channels.PermanentError{Err: fmt.Errorf("discord: %s: %w", op, err)}
		}
	}
	if errors.Is(err, discordgo.ErrUnauthorized) || errors.Is(err, discordgo.ErrJSONUnmarshal) {
		return &channels.PermanentError{Err: fmt.Errorf("discord: %s: %w", op, err)}
	}
	return fmt.Errorf("discord: %s: %w", op, err)
}

// resolveChat turns "user:<id>" into that user's DM channel.
func (c *Channel) resolveChat(ctx context.Context, chatID string) (string, error) {
	userID, ok := strings.CutPrefix(chatID, userChatPrefix)
	if !ok {
		return chatID, nil
	}
	if id, ok := c.dms.get(userID); ok {
		return id, nil
	}
	ch, err := c.sess.UserChannelCreate(userID, discordgo.WithContext(ctx))
	if err != nil {
		return "", classify("open DM with "+userID, err)
	}
	c.dms.put(userID, ch.ID)
	return ch.ID, nil
}

// dmCache remembers DM channel ids by user id.
type dmCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (d *dmCache) get(user string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.m[user]
	return id, ok
}

func (d *dmCache) put(user, channel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= 1024 {
		d.m = map[string]string{}
	}
	d.m[user] = channel
}
