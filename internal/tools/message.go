package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Publisher is what the message tool needs from the bus.
type Publisher interface {
	PublishOutbound(ctx context.Context, m bus.OutboundMessage) error
}

// TargetPolicy says whether the model may send to a chat other than the one
// it is answering (e.g. the owner's allowlisted chats). nil allows none.
type TargetPolicy func(channel, chatID string) bool

// maxMediaPerMessage bounds attachments on one message.
const maxMediaPerMessage = 10

// Message is the message tool: send a message (and files) to a chat now.
type Message struct {
	pub   Publisher
	allow TargetPolicy
	ws    *workspace.Root
}

// NewMessage returns the message tool. Media paths are resolved in ws.
func NewMessage(pub Publisher, allow TargetPolicy, ws *workspace.Root) *Message {
	return &Message{pub: pub, allow: allow, ws: ws}
}

func (*Message) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "message",
		Description: "Send a message to the user's chat right away, optionally with files from the workspace " +
			"(images are shown as pictures, other files as attachments). Your final answer is sent automatically; " +
			"use this for something extra, such as a file, a progress note during long work, or a message to another " +
			"chat. Another chat (channel and chat_id) is reachable only if the owner allowed it. " +
			fmt.Sprintf("At most %d files.", maxMediaPerMessage),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "content": {"type": "string", "description": "Message text (Markdown)."},
    "channel": {"type": "string", "description": "Channel of another chat (telegram, discord). Default: the current chat's."},
    "chat_id": {"type": "string", "description": "Id of another chat. Default: the current chat."},
    "media": {"type": "array", "items": {"type": "string"}, "description": "Workspace paths of files to attach."}
  },
  "required": ["content"]
}`),
	}
}

type messageArgs struct {
	Content string   `json:"content"`
	Channel string   `json:"channel"`
	ChatID  string   `json:"chat_id"`
	Media   []string `json:"media"`
}

func (t *Message) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[messageArgs]("message", inv)
	if err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(a.Content) == "" && len(a.Media) == 0 {
		return errorResult("content is empty and there are no media; nothing to send."), nil
	}
	if len(a.Media) > maxMediaPerMessage {
		return errorResult(fmt.Sprintf("%d files given; at most %d per message.", len(a.Media), maxMediaPerMessage)), nil
	}
	channel, chatID, current, problem := t.target(a, inv.Origin)
	if problem != "" {
		return errorResult(problem), nil
	}
	var media []llm.Part
	for _, p := range a.Media {
		part, err := t.mediaPart(p)
		if err != nil {
			return Result{}, err
		}
		media = append(media, part)
	}
	out := bus.OutboundMessage{
		Channel: channel,
		ChatID:  chatID,
		Kind:    bus.KindMessage,
		Content: a.Content,
		Media:   media,
	}
	if current {
		// Thread or topic ids belong to the current chat only.
		out.Metadata = inv.Origin.Metadata
	}
	if err := t.pub.PublishOutbound(ctx, out); err != nil {
		return Result{}, fmt.Errorf("message not sent: %w", err)
	}
	where := "the current chat"
	if !current {
		where = channel + ":" + chatID
	}
	text := "Message sent to " + where
	if len(media) > 0 {
		text += fmt.Sprintf(" with %d file(s)", len(media))
	}
	return Result{Text: text + "."}, nil
}

// target picks the destination: the origin's chat unless the arguments name
// another one that the policy allows. problem explains a refusal.
func (t *Message) target(a messageArgs, o Origin) (channel, chatID string, current bool, problem string) {
	channel, chatID = a.Channel, a.ChatID
	if channel == "" {
		channel = o.Channel
	}
	if chatID == "" {
		if channel != o.Channel {
			return "", "", false, "chat_id is required when sending to another channel."
		}
		chatID = o.ChatID
	}
	if channel == "" || chatID == "" {
		return "", "", false, "there is no current chat to send to; give channel and chat_id."
	}
	if channel == o.Channel && chatID == o.ChatID {
		return channel, chatID, true, ""
	}
	if t.allow == nil || !t.allow(channel, chatID) {
		return "", "", false, fmt.Sprintf("sending to %s:%s is not allowed; only the current chat and chats "+
			"the owner allowed can be reached.", channel, chatID)
	}
	return channel, chatID, false, ""
}

// mediaPart turns a workspace path into an image part (for pictures) or a
// file_ref part.
func (t *Message) mediaPart(p string) (llm.Part, error) {
	where, err := t.ws.Resolve(p)
	if err != nil {
		return llm.Part{}, err
	}
	f, err := t.ws.Open(p)
	if err != nil {
		return llm.Part{}, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return llm.Part{}, err
	}
	if !fi.Mode().IsRegular() {
		return llm.Part{}, fmt.Errorf("media %s is not a regular file", p)
	}
	mimeType := mime.TypeByExtension(strings.ToLower(filepath.Ext(where)))
	if mimeType == "" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		mimeType = http.DetectContentType(head[:n])
	}
	if base, _, err := mime.ParseMediaType(mimeType); err == nil {
		mimeType = base
	}
	if strings.HasPrefix(mimeType, "image/") {
		return llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: mimeType, Path: where}}, nil
	}
	return llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{
		Path: where, MIME: mimeType, Size: fi.Size(), Name: filepath.Base(where),
	}}, nil
}

// SentToCurrentChat reports whether call, a successful message-tool call
// with result res, delivered to the chat of origin. The agent uses it so
// that a turn that already answered through the message tool does not send
// its final text again
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func SentToCurrentChat(call llm.ToolCall, res llm.ToolResult, origin Origin) bool {
	if call.Name != "message" || res.IsError || call.ParseError != "" {
		return false
	}
	v, err := decodeJSON(call.Arguments)
	if err != nil {
		return false
	}
	args, _ := v.(map[string]any)
	str := func(k string) string {
		switch x := args[k].(type) {
		case string:
			return x
		case json.Number:
			return x.String()
		}
		return ""
	}
	channel, chatID := str("channel"), str("chat_id")
	return (channel == "" || channel == origin.Channel) && (chatID == "" || chatID == origin.ChatID)
}
