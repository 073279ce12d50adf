package agent

import (
	"encoding/json"
	"strings"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// This file decides what the user reads at the end of a turn
// (docs/reliability.md#every-turn-ends-with-something-to-read): the model's
// text, with a note when the model stopped for a reason other than having
// finished, or a short notice when it left nothing to show. What each stop
// reason means is in llm's table (llm.ClassifyStop). Empty answers and
// malformed calls never get here: the router asks again and falls back
// (llm.CheckAnswer), and when every route fails the turn fails with the notice
// of its kind (llm.Classify). The one empty answer taken is the end of a turn
// that already answered through the message tool (Request.EmptyOK).

// answerText is what the user reads for the model's final answer msg: its
// text with the note its stop reason calls for, the notice alone when it
// has no text, or "" when the text only repeats what the message tool
// already sent to this chat (sent) and the stop needs no word.
func answerText(msg llm.Message, sent []string) string {
	text := msg.Text()
	if repeats(text, sent) {
		text = ""
	}
	stop, ok := llm.ClassifyStop(msg.Stop())
	switch {
	case !ok || msg.Meta.Synthetic:
		return text
	case strings.TrimSpace(text) == "":
		return stop.UserText()
	}
	return strings.TrimRight(text, " \n") + "\n\n" + stop.Note
}

// repeats reports whether text says nothing the message tool did not
// already send: it is empty, or equal to one of sent but for whitespace.
func repeats(text string, sent []string) bool {
	norm := strings.Join(strings.Fields(text), " ")
	if norm == "" {
		return true
	}
	for _, s := range sent {
		if strings.Join(strings.Fields(s), " ") == norm {
			return true
		}
	}
	return false
}

// messageContent is the text a message-tool call sent.
func messageContent(c llm.ToolCall) string {
	var args struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(c.Arguments, &args) // a call that did not parse never sent
	return args.Content
}

// keepable returns msg as it may be saved: an answer with no parts that a
// stop reason explains (a filter withheld everything) is saved as the
// notice the user read, marked synthetic, since an assistant message
// without parts is invalid
// (docs/reliability.md#every-turn-ends-with-something-to-read). Other answers
// come back as they are.
func keepable(msg llm.Message) llm.Message {
	if _, noted := llm.ClassifyStop(msg.Stop()); len(msg.Parts) > 0 || !noted {
		return msg
	}
	meta := llm.Meta{}
	if msg.Meta != nil {
		meta = *msg.Meta
	}
	meta.Synthetic = true
	msg.Meta = &meta
	msg.Parts = []llm.Part{llm.Text(answerText(llm.Message{Role: llm.RoleAssistant, Meta: &llm.Meta{StopReason: meta.StopReason}}, nil))}
	return msg
}
