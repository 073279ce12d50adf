package agent

import (
	"slices"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// A channel that can redeliver (Telegram, through its update journal) keeps
// a message until the agent acknowledges it, which the agent does once the
// turn's answer was delivered. A crash in between makes the message come
// back after the restart, although its user message may already be in the
// session, and even the answer. The session records each user message's
// platform ids (Meta.MessageIDs), so a redelivered message is recognised:
//
//   - not in the session: a normal turn;
//   - in the session, its turn unfinished (the crash hit mid-turn): the turn
//     is resumed from what the session holds, without a second user message;
//   - in the session and answered: the answer may never have reached the
//     user (the crash hit before delivery), so the recorded answer is sent
//     again, and nobody is asked twice;
//   - in the session, followed by a newer user message before any answer:
//     a later turn took it up; nothing more is sent.

// replayScan bounds how far back a redelivered message is looked for; it
// arrives right after a restart, so it is near the end.
const replayScan = 200

// replayKind is what the session already holds of an inbound message.
type replayKind int

const (
	notRecorded replayKind = iota
	unfinished             // recorded; the turn never finished: resume it
	answered               // recorded and answered: send the answer again
	superseded             // recorded; a later turn took it up
)

// replay is a redelivered message and what to do about it.
type replay struct {
	msg  bus.InboundMessage
	kind replayKind
	// answer is the recorded final text (answered); empty when the turn
	// answered through the message tool.
	answer string
	// callIDs are the tool call ids of an unfinished turn, so a resumed
	// turn keeps them unique.
	callIDs []string
}

// classify sorts batch into messages the session does not hold yet (fresh)
// and redeliveries of ones it does.
func classify(msgs []llm.Message, batch []bus.InboundMessage) (fresh []bus.InboundMessage, replays []replay) {
	for _, m := range batch {
		r := find(msgs, m)
		if r.kind == notRecorded {
			fresh = append(fresh, m)
			continue
		}
		replays = append(replays, r)
	}
	return fresh, replays
}

// find looks m up among the last replayScan messages.
func find(msgs []llm.Message, m bus.InboundMessage) replay {
	r := replay{msg: m}
	// Only platform messages are redelivered; a subagent's or a job's
	// message may carry its origin's id (to reply to it) but is always new.
	if m.MessageID == "" || m.Metadata[MetaSource] != "" {
		return r
	}
	at := -1
	for i := len(msgs) - 1; i >= max(0, len(msgs)-replayScan); i-- {
		if msgs[i].Role == llm.RoleUser && msgs[i].Meta != nil && slices.Contains(msgs[i].Meta.MessageIDs, m.MessageID) {
			at = i
			break
		}
	}
	if at < 0 {
		return r
	}
	end := at + 1 // the turn runs up to the next user message
	for end < len(msgs) && msgs[end].Role != llm.RoleUser {
		end++
	}
	turn := msgs[at+1 : end]
	switch {
	case finished(turn):
		r.kind = answered
		// What the user read the first time: see answerText.
		r.answer = answerText(turn[len(turn)-1], sentByMessageTool(turn, m))
	case end < len(msgs):
		r.kind = superseded
	default:
		r.kind = unfinished
		for _, msg := range turn {
			for _, c := range msg.ToolCalls() {
				r.callIDs = append(r.callIDs, c.ID)
			}
		}
	}
	return r
}

// finished reports whether a turn's messages end with the model's answer:
// an assistant message that calls no tools.
func finished(turn []llm.Message) bool {
	if len(turn) == 0 {
		return false
	}
	last := turn[len(turn)-1]
	return last.Role == llm.RoleAssistant && len(last.ToolCalls()) == 0
}

// sentByMessageTool returns what the turn sent to m's chat through the
// message tool; a final text repeating it was not sent again
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func sentByMessageTool(turn []llm.Message, m bus.InboundMessage) []string {
	calls := map[string]llm.ToolCall{}
	origin := tools.Origin{Channel: m.Channel, ChatID: m.ChatID}
	var sent []string
	for _, msg := range turn {
		for _, c := range msg.ToolCalls() {
			calls[c.ID] = c
		}
		for _, res := range msg.ToolResults() {
			if c, ok := calls[res.ToolCallID]; ok && tools.SentToCurrentChat(c, res, origin) {
				sent = append(sent, messageContent(c))
			}
		}
	}
	return sent
}
