package daemon

import (
	"time"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
)

// progressTurn is the reproduction of issue 29 §1: the model sends a
// progress note with the message tool, then answers.
func progressTurn() []fakellm.Reply {
	return []fakellm.Reply{
		// Text streamed slowly enough that its draft is on screen before
		// the note goes out.
		{Text: "Let me look.", Chunk: 4, ChunkDelay: 30 * time.Millisecond,
			ToolCalls: []fakellm.Call{{ID: "m1", Name: "message", Args: `{"content":"working on it"}`}}},
		{Text: "The answer is **42**."},
	}
}

// TestProgressNoteKeepsTheAnswer: after a message-tool note the final
// answer still reaches the chat, below the note; the text the model wrote
// before the note stays where it was, without its tool hint, and no draft
// is deleted (S-A3). Telegram and Discord, through their fakes.
func TestProgressNoteKeepsTheAnswer(t *testing.T) {
	t.Run("telegram", func(t *testing.T) {
		g := startGateway(t, false, "")
		g.script.Push(progressTurn()...)
		g.tg.PushMessage(telegramfake.DM(owner, "what is the answer?"))
		g.waitLast(owner, "The answer is 42.")
		var shown []string
		for _, m := range g.tg.Sent(owner) {
			if m.Deleted {
				t.Errorf("a message was deleted: %q", m.Visible)
			}
			shown = append(shown, m.Visible)
		}
		if want := "Let me look.|working on it|The answer is 42."; strings.Join(g.tg.Visible(owner), "|") != want {
			t.Errorf("chat shows %q, want %q (all sent: %q)", g.tg.Visible(owner), want, shown)
		}
	})
	t.Run("discord", func(t *testing.T) {
		g := startGateway(t, true, "")
		g.dc.WaitReady(t, 1)
		dm := g.dc.AddDM(g.dcOwner)
		g.script.Push(progressTurn()...)
		g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: g.dcOwner, Content: "what is the answer?"})
		g.dcWaitLast(dm, "The answer is **42**.")
		var shown []string
		for _, m := range g.dc.Messages(dm) {
			if m.Deleted {
				t.Errorf("a message was deleted: %q", m.Content)
				continue
			}
			shown = append(shown, m.Content)
		}
		if want := "Let me look.|working on it|The answer is **42**."; strings.Join(shown, "|") != want {
			t.Errorf("channel shows %q, want %q", shown, want)
		}
	})
}
