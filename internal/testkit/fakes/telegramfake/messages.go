package telegramfake

import (
	"fmt"

	"github.com/go-telegram/bot/models"
)

// DM is a private message from user from (whose chat has the same id), as
// a test pushes it with PushMessage.
func DM(from int64, text string) models.Message {
	return models.Message{Chat: models.Chat{ID: from, Type: models.ChatTypePrivate},
		From: &models.User{ID: from, FirstName: "User", Username: fmt.Sprintf("user%d", from)}, Text: text}
}

// Group is a message from user from in the supergroup chat.
func Group(chat, from int64, text string) models.Message {
	m := DM(from, text)
	m.Chat = models.Chat{ID: chat, Type: models.ChatTypeSupergroup, Title: "team"}
	return m
}

// Mention is a group message that @mentions the bot at its start, with the
// mention entity Telegram attaches.
func Mention(chat, from int64, text string) models.Message {
	at := "@" + Username
	m := Group(chat, from, at+" "+text)
	m.Entities = []models.MessageEntity{{Type: models.MessageEntityTypeMention, Offset: 0, Length: len(at)}}
	return m
}
