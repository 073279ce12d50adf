package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

func TestTelegramWithTheRealAgent(t *testing.T) {
	g := startGateway(t, false, "")

	// DM round trip.
	g.script.Push(fakellm.Reply{Text: "Hello, **owner**!"})
	g.tg.PushMessage(telegramfake.DM(owner, "hi"))
	g.waitLast(owner, "Hello, owner!")

	// A tool turn: the model reads a file, then answers.
	if err := os.WriteFile(filepath.Join(g.cfg.Agents.Workspace, "todo.md"), []byte("water the plants"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c1", Name: "read_file", Args: `{"path":"todo.md"}`}}},
		fakellm.Reply{Text: "You need to water the plants."},
	)
	g.tg.PushMessage(telegramfake.DM(owner, "what is on my todo list?"))
	g.waitLast(owner, "You need to water the plants.")

	// Group: no mention → ignored and no model call; mention → answered.
	calls := len(g.script.Requests())
	g.tg.PushMessage(telegramfake.Group(-42, owner, "just chatting"))
	g.script.Push(fakellm.Reply{Text: "In the group."})
	g.tg.PushMessage(telegramfake.Mention(-42, owner, "are you there?"))
	g.waitLast(-42, "In the group.")
	if got := g.tg.Visible(-42); len(got) != 1 {
		t.Fatalf("group visible = %q", got)
	}
	reqs := g.script.Requests()
	if len(reqs) != calls+1 || strings.Contains(reqs[len(reqs)-1].LastUserText(), "@"+telegramfake.Username) {
		t.Errorf("group gating: %d model calls (want %d), mention not stripped: %q", len(reqs), calls+1, reqs[len(reqs)-1].LastUserText())
	}

	// A stranger costs nothing; /whoami still answers them.
	calls = len(g.script.Requests())
	g.tg.PushMessage(telegramfake.DM(stranger, "let me in"))
	g.tg.PushMessage(telegramfake.DM(stranger, "/whoami"))
	if got := g.visible(stranger, 1); !strings.Contains(got[0], fmt.Sprint(stranger)) {
		t.Errorf("/whoami = %q", got)
	}
	if n := len(g.script.Requests()); n != calls {
		t.Errorf("stranger caused %d model calls", n-calls)
	}

	// A 9,000-character answer with code blocks arrives as valid chunks.
	var long strings.Builder
	for i := 0; long.Len() < 9000; i++ {
		fmt.Fprintf(&long, "Paragraph %d with <angle> & ampersand text that needs escaping.\n\n```go\nfunc f%d() { return }\n```\n\n", i, i)
	}
	g.script.Push(fakellm.Reply{Text: long.String(), Chunk: 512})
	before := len(g.tg.Visible(owner))
	g.tg.PushMessage(telegramfake.DM(owner, "write a lot"))
	g.tg.Wait(t, "long answer chunks", func() bool {
		v := g.tg.Visible(owner)
		return len(v) >= before+3 && strings.Contains(v[len(v)-1], "Paragraph")
	})
	for _, m := range g.tg.Sent(owner)[before:] {
		if n := len([]rune(m.Text)); n > 4096 {
			t.Errorf("chunk of %d characters", n)
		}
		if m.ParseMode == "HTML" {
			if _, err := telegramfake.ParseHTML(m.Text); err != nil {
				t.Errorf("invalid HTML chunk: %v", err)
			}
		}
	}
	g.sessionValid()
}

func TestDiscordWithTheRealAgent(t *testing.T) {
	g := startGateway(t, true, "")
	g.dc.WaitReady(t, 1)

	dmChan := g.dc.AddDM(g.dcOwner)
	g.script.Push(fakellm.Reply{Text: "Hi from Discord."})
	g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dmChan, Author: g.dcOwner, Content: "hello"})
	g.dcWaitLast(dmChan, "Hi from Discord.")

	guild := g.dc.AddGuild("home")
	g.dc.AddMember(guild, g.dcOwner)
	ch := g.dc.AddTextChannel(guild, "general")
	calls := len(g.script.Requests())
	g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: g.dcOwner, Content: "no mention here"})
	g.script.Push(fakellm.Reply{Text: "Answered in the guild."})
	g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: g.dcOwner, Content: "<@" + g.dc.Bot().ID + "> ping"})
	g.dcWaitLast(ch, "Answered in the guild.")
	if msgs := g.dc.Messages(ch); len(msgs) != 1 {
		t.Fatalf("guild reply = %+v", msgs)
	}
	if n := len(g.script.Requests()); n != calls+1 {
		t.Errorf("guild gating: %d model calls, want %d", n-calls, 1)
	}

	thread := g.dc.AddThread(ch, "topic")
	long := strings.Repeat("Long line of thread text. ", 200)
	g.script.Push(fakellm.Reply{Text: long})
	g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: thread, Author: g.dcOwner, Content: "<@" + g.dc.Bot().ID + "> long please"})
	g.dc.WaitFor(t, "long answer complete", func() bool {
		var all strings.Builder
		for _, m := range g.dc.Messages(thread) {
			all.WriteString(m.Content + " ")
		}
		return strings.Join(strings.Fields(all.String()), " ") == strings.TrimSpace(long)
	})
	for _, m := range g.dc.Messages(thread) {
		if n := len([]rune(m.Content)); n > 2000 {
			t.Errorf("Discord chunk of %d characters", n)
		}
	}
	if len(g.dc.Messages(ch)) != 1 {
		t.Errorf("thread answer leaked into the parent channel")
	}
	g.sessionValid()
}

func TestShutdownFinishesRunningTurn(t *testing.T) {
	g := startGateway(t, false, "")
	g.script.Push(fakellm.Reply{Text: "slow but complete", Delay: 300 * time.Millisecond})
	g.tg.PushMessage(telegramfake.DM(owner, "take your time"))
	g.waitUntil("model call in flight", func() bool { return len(g.script.Requests()) == 1 })
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if got := g.tg.Visible(owner); len(got) != 1 || got[0] != "slow but complete" || len(g.tg.Sent(owner)) != 1 {
		t.Errorf("turn in flight at shutdown: visible %q", got)
	}
	g.sessionValid()
}

// A turn still running when the gateway is asked to stop finishes, its
// answer goes out, and a restart neither answers it again nor loses the
// message that was waiting behind it.
func TestRestartAfterShutdownDuringTurnsAnswersEachOnce(t *testing.T) {
	g := startWith(t, setup{agents: "max_concurrent_turns: 1"})
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		text := r.LastUserText()
		reply := fakellm.Reply{Text: "answer to " + text[strings.LastIndex(text, "\n")+1:]}
		if strings.HasSuffix(text, "first") {
			reply.Delay = time.Second
		}
		return reply
	}
	g.tg.PushMessage(telegramfake.DM(owner, "first"))
	g.waitUntil("model call in flight", func() bool { return len(g.script.Requests()) == 1 })
	second := g.tg.PushMessage(telegramfake.DM(owner+1, "second")) // waits for the only turn slot
	g.tg.Wait(t, "second message received", func() bool { return g.tg.Confirmed() > second })
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	g.start() // same data dir and workspace: a restart
	// A new message in the same chat is handled after anything replayed there.
	g.tg.PushMessage(telegramfake.DM(owner+1, "third"))
	g.waitLast(owner+1, "answer to third")
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	for chat, want := range map[int64]string{owner: "answer to first", owner + 1: "answer to second|answer to third"} {
		if got := strings.Join(g.tg.Visible(chat), "|"); got != want {
			t.Errorf("chat %d sees %q, want %q", chat, got, want)
		}
	}
	if r := roles(g.sessionMessages("telegram:101")); r != "user,assistant,user,assistant" {
		t.Errorf("second chat's roles = %s, want each message once", r)
	}
}
