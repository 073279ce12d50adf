package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
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
// is deleted (docs/reliability.md#every-turn-ends-with-something-to-read).
// Telegram and Discord, through their fakes.
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

// TestBrokenToolArgumentsDoNotBreakTheChat: a tool call whose arguments
// are not JSON is answered with an error result, and replayed with {} on
// every later request, so a server that parses arguments (vLLM) keeps
// answering the chat
// (docs/reliability.md#every-turn-ends-with-something-to-read, issue 29 §3).
func TestBrokenToolArgumentsDoNotBreakTheChat(t *testing.T) {
	s := setup{}
	g := newGW(t, s)
	g.llm = openaifake.New(t, g.script, openaifake.WithStrictArguments())
	g.writeConfig(s, "")
	g.start()

	g.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path": "notes`}}},
		fakellm.Reply{Text: "Sorry, I could not read it."},
	)
	g.tg.PushMessage(telegramfake.DM(owner, "read my notes"))
	g.waitLast(owner, "Sorry, I could not read it.")
	g.script.Push(fakellm.Reply{Text: "Still here."})
	g.tg.PushMessage(telegramfake.DM(owner, "hello again"))
	g.waitLast(owner, "Still here.")

	if rej := g.llm.Rejected(); len(rej) > 0 {
		t.Fatalf("the strict server refused %d request(s): %s", len(rej), rej[0].Message)
	}
	reqs := g.script.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for _, req := range reqs[1:] {
		var call *fakellm.Call
		var result string
		for _, m := range req.Messages {
			for i := range m.ToolCalls {
				call = &m.ToolCalls[i]
			}
			for _, r := range m.ToolResults {
				result = r.Content
			}
		}
		if call == nil || call.Args != "{}" {
			t.Errorf("the broken call was replayed as %+v, want arguments {}", call)
		}
		if !strings.Contains(result, "not valid JSON") {
			t.Errorf("the error result no longer says what was wrong: %q", result)
		}
	}
	// The session keeps what the model really sent.
	saved := 0
	for _, m := range g.sessionMessages(fmt.Sprintf("telegram:%d", owner)) {
		for _, c := range m.ToolCalls() {
			saved++
			if c.RawArgs != `{"path": "notes` || c.ParseError == "" {
				t.Errorf("saved call %+v, want the raw arguments and the parse error", c)
			}
		}
	}
	if saved != 1 {
		t.Errorf("%d calls saved, want 1", saved)
	}
}
