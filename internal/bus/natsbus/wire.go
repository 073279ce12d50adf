package natsbus

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// names are the subjects, streams and consumers of one prefix.
type names struct {
	prefix string
}

func (n names) inStream() string  { return strings.ToUpper(n.prefix) + "_IN" }
func (n names) outStream() string { return strings.ToUpper(n.prefix) + "_OUT" }

// leaseBucket is the KV bucket of the leases (Lease).
func (n names) leaseBucket() string { return strings.ToUpper(n.prefix) + "_LEASE" }

// inSubject is partition p's subject; inSubjects matches them all.
func (n names) inSubject(p int) string { return fmt.Sprintf("%s.in.%d", n.prefix, p) }
func (n names) inSubjects() string     { return n.prefix + ".in.*" }

// outSubject is a channel's outbound subject; outSubjects matches them all.
func (n names) outSubject(channel string) string { return n.prefix + ".out." + token(channel) }
func (n names) outSubjects() string              { return n.prefix + ".out.>" }

func (n names) stopSubject() string { return n.prefix + ".stop" }

func (n names) inConsumer(p int) string { return fmt.Sprintf("%s_in_%d", n.prefix, p) }
func (n names) outConsumer() string     { return n.prefix + "_out" }

// token makes s usable as one subject token: channel names are plain words,
// but a stray dot or wildcard must not change which subjects match.
func token(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// partition hashes a session key onto one of n partitions (FNV-1a: stable
// across processes and versions, which the mapping must be while messages
// are in the stream).
func partition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// wireIn is an InboundMessage on the wire: every field but the Ack callback
// (docs/scale-out.md#subjects-and-streams). TestWireRoundTripsEveryField fills
// every field by reflection, so a field added to bus.InboundMessage and
// forgotten here fails that test.
type wireIn struct {
	Channel    string            `json:"channel"`
	SenderID   string            `json:"sender_id,omitempty"`
	SenderName string            `json:"sender_name,omitempty"`
	ChatID     string            `json:"chat_id"`
	MessageID  string            `json:"message_id,omitempty"`
	Content    string            `json:"content,omitempty"`
	Media      []llm.Part        `json:"media,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	SessionKey string            `json:"session_key,omitempty"`
	Group      string            `json:"group,omitempty"`
	Time       time.Time         `json:"time"`
	Model      string            `json:"model,omitempty"`
	History    []llm.Message     `json:"history,omitempty"`
	Ephemeral  bool              `json:"ephemeral,omitempty"`
	More       bool              `json:"more,omitempty"`
}

func encodeIn(m bus.InboundMessage) ([]byte, error) {
	return json.Marshal(wireIn{
		Channel: m.Channel, SenderID: m.SenderID, SenderName: m.SenderName, ChatID: m.ChatID,
		MessageID: m.MessageID, Content: m.Content, Media: m.Media, Metadata: m.Metadata,
		SessionKey: m.SessionKey, Group: m.Group, Time: m.Time,
		Model: m.Model, History: m.History, Ephemeral: m.Ephemeral, More: m.More,
	})
}

func decodeIn(data []byte) (bus.InboundMessage, error) {
	var w wireIn
	if err := json.Unmarshal(data, &w); err != nil {
		return bus.InboundMessage{}, err
	}
	return bus.InboundMessage{
		Channel: w.Channel, SenderID: w.SenderID, SenderName: w.SenderName, ChatID: w.ChatID,
		MessageID: w.MessageID, Content: w.Content, Media: w.Media, Metadata: w.Metadata,
		SessionKey: w.SessionKey, Group: w.Group, Time: w.Time,
		Model: w.Model, History: w.History, Ephemeral: w.Ephemeral, More: w.More,
	}, nil
}

// wireOut is an OutboundMessage on the wire: every field but Delivered.
type wireOut struct {
	Channel  string            `json:"channel"`
	ChatID   string            `json:"chat_id"`
	Kind     bus.Kind          `json:"kind"`
	Content  string            `json:"content,omitempty"`
	Media    []llm.Part        `json:"media,omitempty"`
	ReplyTo  string            `json:"reply_to,omitempty"`
	TurnID   string            `json:"turn_id,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	IsError  bool              `json:"is_error,omitempty"`
	Usage    llm.Usage         `json:"usage,omitzero"`
	Stop     llm.StopReason    `json:"stop,omitempty"`
}

func encodeOut(m bus.OutboundMessage) ([]byte, error) {
	return json.Marshal(wireOut{
		Channel: m.Channel, ChatID: m.ChatID, Kind: m.Kind, Content: m.Content, Media: m.Media,
		ReplyTo: m.ReplyTo, TurnID: m.TurnID, Metadata: m.Metadata, IsError: m.IsError, Usage: m.Usage, Stop: m.Stop,
	})
}

func decodeOut(data []byte) (bus.OutboundMessage, error) {
	var w wireOut
	if err := json.Unmarshal(data, &w); err != nil {
		return bus.OutboundMessage{}, err
	}
	return bus.OutboundMessage{
		Channel: w.Channel, ChatID: w.ChatID, Kind: w.Kind, Content: w.Content, Media: w.Media,
		ReplyTo: w.ReplyTo, TurnID: w.TurnID, Metadata: w.Metadata, IsError: w.IsError, Usage: w.Usage, Stop: w.Stop,
	}, nil
}

// isStop reports whether content is the /stop command (also /stop@botname,
// as Telegram groups send it). It must not wait behind the turn it stops.
func isStop(content string) bool {
	c, _, ok := commands.Parse(content)
	return ok && c.Name == "stop"
}
