package daemon

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// A busy chat, end to end through the fake Telegram (issue 36): what people
// send while an answer runs is answered next, attributed to whoever wrote
// it, and /stop loses none of it.

// gatedModel answers echoLast, the first call only once open is called.
func gatedModel(t *testing.T, g *gw) (open func(), calls *atomic.Int32) {
	gate := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	calls = new(atomic.Int32)
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 1 {
			<-gate
		}
		return fakellm.Reply{Text: "answered"}
	}
	return open, calls
}

// While the bot answers in a group, bob and then alice ask; the follow-up
// turn tells the model who asked what, in order (each sender as the
// channel names them: display name and @username).
func TestBusyGroupKeepsWhoAskedWhat(t *testing.T) {
	g := startWith(t, setup{telegram: "group_policy: open\nstreaming: false"})
	const group, bob, alice = -1001, owner, owner + 1
	open, calls := gatedModel(t, g)
	g.tg.PushMessage(telegramfake.Group(group, bob, "first question"))
	g.waitUntil("the first turn to run", func() bool { return calls.Load() == 1 })
	g.tg.PushMessage(telegramfake.Group(group, bob, "what is the capital of France?"))
	g.tg.PushMessage(telegramfake.Group(group, alice, "and of Spain?"))
	// /help is answered at once, after the agent took what came before it:
	// both questions are queued behind the running turn.
	g.tg.PushMessage(telegramfake.Group(group, bob, "/help"))
	g.waitPrefix(group, "Commands:")
	open()
	g.tg.Wait(t, "two answers", func() bool {
		n := 0
		for _, v := range g.tg.Visible(group) {
			if v == "answered" {
				n++
			}
		}
		return n == 2
	})
	reqs := g.script.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2 (the burst is one follow-up turn)", len(reqs))
	}
	text := reqs[1].LastUserText()
	bobAt := strings.Index(text, "[User (@user100) · ")
	aliceAt := strings.Index(text, "[User (@user101) · ")
	if bobAt < 0 || aliceAt < bobAt || !strings.Contains(text[bobAt:aliceAt], "what is the capital of France?") ||
		!strings.Contains(text[aliceAt:], "and of Spain?") || strings.Contains(text, "· from @") {
		t.Errorf("the merged message does not say who asked what:\n%s", text)
	}
}

// /stop cancels the running answer; the correction sent while it ran is
// answered next and saved, and the reply says so.
func TestStopAnswersTheQueuedCorrection(t *testing.T) {
	g := startWith(t, setup{telegram: "streaming: false"})
	g.script.Push(fakellm.Reply{Text: "a very long essay", Delay: 10 * time.Minute})
	g.tg.PushMessage(telegramfake.DM(owner, "write an essay on bees"))
	g.waitUntil("the first turn to run", func() bool { return len(g.script.Requests()) == 1 })
	g.script.Push(fakellm.Reply{Text: "Bees, briefly: they make honey."})
	g.tg.PushMessage(telegramfake.DM(owner, "actually, keep it to one line"))
	g.tg.PushMessage(telegramfake.DM(owner, "/stop"))
	g.waitLast(owner, "Bees, briefly: they make honey.")
	v := g.tg.Visible(owner)
	if !strings.Contains(strings.Join(v, "|"), "⏹ Stopped. I'll answer the message you sent meanwhile now.") {
		t.Errorf("chat = %q; want the stop reply to say the queued message comes next", v)
	}
	if text := g.script.Requests()[1].LastUserText(); !strings.HasSuffix(text, "actually, keep it to one line") {
		t.Errorf("second call's message = %q", text)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	msgs := g.sessionMessages("telegram:100")
	if got := roles(msgs); got != "user,user,assistant" || !strings.HasSuffix(msgs[1].Text(), "actually, keep it to one line") {
		t.Errorf("session roles %s; the correction must be saved with its answer", got)
	}
}
