package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const owner = 100 // the allowlisted user

// standIn is the agent's stand-in: it consumes the bus like the real agent
// (ack once recorded, then Start … Final on the outbound side) and replies
// with whatever reply returns. The real agent can replace it: it only
// needs the bus.
type standIn struct {
	mu    sync.Mutex
	got   []bus.InboundMessage
	reply func(bus.InboundMessage) []bus.OutboundMessage
	noAck bool
	done  chan struct{}
}

func echo(m bus.InboundMessage) []bus.OutboundMessage {
	return turn(m, "echo: "+m.Content)
}

// turn is what an agent publishes for one answer.
func turn(m bus.InboundMessage, answer string) []bus.OutboundMessage {
	base := bus.OutboundMessage{Channel: m.Channel, ChatID: m.ChatID, TurnID: m.MessageID, Metadata: m.Metadata, ReplyTo: m.MessageID}
	start, final := base, base
	start.Kind = bus.KindStart
	final.Kind, final.Content = bus.KindFinal, answer
	return []bus.OutboundMessage{start, final}
}

func (a *standIn) run(b *bus.Bus) {
	defer close(a.done)
	for m := range b.Inbound() {
		a.mu.Lock()
		a.got = append(a.got, m)
		reply, noAck := a.reply, a.noAck
		a.mu.Unlock()
		if !noAck && m.Ack != nil {
			m.Ack()
		}
		if reply == nil {
			continue
		}
		for _, o := range reply(m) {
			if err := b.PublishOutbound(context.Background(), o); err != nil {
				return
			}
		}
	}
}

func (a *standIn) received() []bus.InboundMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]bus.InboundMessage(nil), a.got...)
}

type env struct {
	t       *testing.T
	srv     *telegramfake.Server
	bus     *bus.Bus
	ch      *telegram.Channel
	agent   *standIn
	pairing *channels.PairingStore
	data    string
	work    string
	clk     *clock.Fake
	stopped bool
	stopFn  func()
}

type opts struct {
	srv     *telegramfake.Server
	data    string
	work    string
	cfg     func(*telegram.Config)
	deps    func(*telegram.Deps)
	reply   func(bus.InboundMessage) []bus.OutboundMessage
	noAck   bool
	fakeClk bool
	log     *zap.Logger
}

func start(t testing.TB, o opts) *env {
	t.Helper()
	e := &env{srv: o.srv, data: o.data, work: o.work}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	if e.srv == nil {
		e.srv = telegramfake.New(t)
	}
	if e.data == "" {
		e.data = t.TempDir()
	}
	if e.work == "" {
		e.work = t.TempDir()
	}
	log := o.log
	if log == nil {
		log = zaptest.NewLogger(t)
	}
	defaults := config.Defaults()
	cfg := *telegram.Of(&defaults)
	cfg.Enabled, cfg.Token, cfg.APIURL = true, telegramfake.Token, e.srv.URL()
	cfg.AllowFrom = []string{strconv.Itoa(owner)}
	cfg.PollTimeout, cfg.StallGrace, cfg.MaxMediaBytes = time.Second, 300*time.Millisecond, 1<<20
	cfg.TypingDelay = 0 // typing shows at once unless a test asks for a delay
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	e.pairing = channels.NewPairingStore(filepath.Join(e.data, "pairing.json"))
	e.bus = bus.New(64)
	deps := telegram.Deps{Bus: e.bus, Pairing: e.pairing, DataDir: e.data, Workspace: e.work,
		Limits:    channels.IntakeLimits(defaults.Agents, cfg.Access),
		AlbumWait: 100 * time.Millisecond, CallTimeout: 5 * time.Second}
	if o.deps != nil {
		o.deps(&deps)
	}
	ch, err := telegram.New(cfg, deps, log)
	if err != nil {
		t.Fatal(err)
	}
	e.ch = ch
	mcfg := channels.ManagerConfig{}
	if o.fakeClk {
		e.clk = clock.NewFake()
		mcfg.Clock = e.clk
	}
	mgr := channels.NewManager(e.bus.Outbound(), mcfg, log)
	if err := mgr.Register(ch, telegram.NewRenderer(), cfg.OutputConfig); err != nil {
		t.Fatal(err)
	}
	reply := o.reply
	if reply == nil {
		reply = echo
	}
	e.agent = &standIn{reply: reply, noAck: o.noAck, done: make(chan struct{})}
	chCtx, stopCh := context.WithCancel(context.Background())
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	chDone, mgrDone := make(chan error, 1), make(chan error, 1)
	go func() { chDone <- ch.Run(chCtx) }()
	go func() { mgrDone <- mgr.Run(mgrCtx) }()
	go e.agent.run(e.bus)
	// Shutdown in the daemon's order: channel (intake) first, then the
	// agent drains, then replies drain.
	e.stopFn = func() {
		stopCh()
		if err := <-chDone; err != nil {
			t.Errorf("channel Run: %v", err)
		}
		e.bus.CloseInbound()
		<-e.agent.done
		e.bus.CloseOutbound()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager Run: %v", err)
		}
		stopMgr()
	}
	t.Cleanup(e.stop)
	e.srv.Wait(t, "connected", func() bool { return len(e.srv.Calls("deleteWebhook", "setWebhook")) > 0 })
	return e
}

func (e *env) stop() {
	if !e.stopped {
		e.stopped = true
		e.stopFn()
	}
}

// waitAcked waits until the channel's journal no longer holds update id:
// the message was fully handled (recorded by the agent, or dropped).
func (e *env) waitAcked(t *testing.T, id int64) {
	t.Helper()
	path := filepath.Join(e.data, "telegram-updates.json")
	deadline := time.Now().Add(10 * time.Second)
	for {
		next, pending, err := telegram.ReadJournal(path)
		if err == nil && next > id {
			found := false
			for _, raw := range pending {
				found = found || bytes.Contains(raw, []byte(fmt.Sprintf(`"update_id":%d`, id)))
			}
			if !found {
				return
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("update %d never acknowledged; journal: %s", id, data)
		}
		time.Sleep(5 * time.Millisecond) // polling a file for an async condition
	}
}

func TestDMRoundTrip(t *testing.T) {
	e := start(t, opts{})
	id := e.srv.PushMessage(telegramfake.DM(owner, "hello"))
	e.srv.Wait(t, "the answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if got := e.srv.Visible(owner); got[0] != "echo: hello" {
		t.Fatalf("visible = %q", got)
	}
	sent := e.srv.Sent(owner)[0]
	if sent.ParseMode != "HTML" || sent.ReplyTo == 0 {
		t.Errorf("answer parse mode %q reply-to %d; want HTML replying to the question", sent.ParseMode, sent.ReplyTo)
	}
	if len(e.srv.Calls("sendChatAction")) == 0 {
		t.Error("no typing indicator")
	}
	// The menu is the command table's menu rows, in order, word for word.
	var menu []models.BotCommand
	for _, c := range commands.Menu() {
		menu = append(menu, models.BotCommand{Command: c.Name, Description: c.Description})
	}
	if cmds := e.srv.Commands(); !slices.Equal(cmds, menu) {
		t.Errorf("setMyCommands = %+v, want %+v", cmds, menu)
	}
	got := e.agent.received()
	if len(got) != 1 || got[0].SenderID != "100" || got[0].SessionKey != "" || got[0].Key() != "telegram:100" {
		t.Fatalf("agent got %+v", got)
	}
	e.waitAcked(t, id)
	e.srv.Wait(t, "offset confirmed", func() bool { return e.srv.Confirmed() > id })
}

func TestGroupGating(t *testing.T) {
	e := start(t, opts{})
	const chat = -500
	ignored := e.srv.PushMessage(telegramfake.Group(chat, owner, "just chatting"))
	e.waitAcked(t, ignored)
	e.srv.PushMessage(telegramfake.Mention(chat, owner, "what time is it?"))
	e.srv.Wait(t, "answer to the mention", func() bool { return len(e.srv.Visible(chat)) == 1 })
	reply := telegramfake.Group(chat, owner, "and now?")
	reply.ReplyToMessage = &models.Message{ID: e.srv.Sent(chat)[0].ID, From: &e.srv.Bot, Chat: reply.Chat, Text: "echo: what time is it?"}
	e.srv.PushMessage(reply)
	e.srv.Wait(t, "answer to the reply", func() bool { return len(e.srv.Visible(chat)) == 2 })
	cmd := telegramfake.Group(chat, owner, "/status@"+telegramfake.Username)
	cmd.Entities = []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: len(cmd.Text)}}
	e.srv.PushMessage(cmd)
	e.srv.Wait(t, "answer to the command", func() bool { return len(e.srv.Visible(chat)) == 3 })
	var contents []string
	for _, m := range e.agent.received() {
		contents = append(contents, m.Content)
	}
	// A reply carries what it answers.
	if strings.Join(contents, "|") != "what time is it?|[in reply to your earlier message: \"echo: what time is it?\"]\nand now?|/status" {
		t.Fatalf("agent got %q: want the mention stripped, unaddressed chatter dropped", contents)
	}
}

func TestDeniedSenderCostsNothing(t *testing.T) {
	e := start(t, opts{})
	id := e.srv.PushMessage(telegramfake.DM(666, "let me in"))
	e.waitAcked(t, id)
	if n := len(e.agent.received()); n != 0 {
		t.Fatalf("a denied message reached the bus (%d)", n)
	}
	if got := e.srv.Sent(666); len(got) != 0 {
		t.Fatalf("the stranger got an answer: %+v", got)
	}
	// /whoami is answered by the channel layer, even for strangers.
	e.srv.PushMessage(telegramfake.DM(666, "/whoami"))
	e.srv.Wait(t, "whoami answer", func() bool { return len(e.srv.Visible(666)) == 1 })
	if got := e.srv.Visible(666)[0]; !strings.Contains(got, "666") || !strings.Contains(got, "allowlist") {
		t.Fatalf("whoami = %q", got)
	}
	if n := len(e.agent.received()); n != 0 {
		t.Fatal("/whoami reached the agent")
	}
}

func TestPairingFlow(t *testing.T) {
	e := start(t, opts{cfg: func(c *telegram.Config) { c.Policy, c.AllowFrom = "pairing", nil }})
	e.srv.PushMessage(telegramfake.DM(777, "hi"))
	e.srv.Wait(t, "pairing code", func() bool { return len(e.srv.Visible(777)) == 1 })
	code := regexp.MustCompile(`approve ([A-Z0-9]{8})`).FindStringSubmatch(e.srv.Visible(777)[0])
	if code == nil {
		t.Fatalf("no code in %q", e.srv.Visible(777)[0])
	}
	if len(e.agent.received()) != 0 {
		t.Fatal("an unpaired sender reached the agent")
	}
	if _, err := channels.NewPairingStore(filepath.Join(e.data, "pairing.json")).Approve(code[1]); err != nil {
		t.Fatal(err) // as `nanobot pairing approve` would, from another process
	}
	e.srv.PushMessage(telegramfake.DM(777, "thanks"))
	e.srv.Wait(t, "answer after approval", func() bool { return len(e.srv.Visible(777)) == 2 })
	if got := e.srv.Visible(777)[1]; got != "echo: thanks" {
		t.Fatalf("after approval: %q", got)
	}
}

// longAnswer is ~9,000 characters of Markdown with code blocks holding
// characters that need escaping.
func longAnswer() (string, []string) {
	var b strings.Builder
	var codeLines []string
	for i := 0; b.Len() < 9000; i++ {
		fmt.Fprintf(&b, "Paragraph %d explains **step %d** in detail, with `x < y && z` and some more words to read.\n\n", i, i)
		b.WriteString("```go\n")
		for j := range 12 {
			line := fmt.Sprintf("if a%d_%d < b && c > d { fmt.Println(\"<%d & %d>\") }", i, j, i, j)
			codeLines = append(codeLines, line)
			b.WriteString(line + "\n")
		}
		b.WriteString("```\n\n")
	}
	return b.String(), codeLines
}

func TestLongAnswerArrivesAsValidChunks(t *testing.T) {
	answer, codeLines := longAnswer()
	e := start(t, opts{reply: func(m bus.InboundMessage) []bus.OutboundMessage { return turn(m, answer) }})
	e.srv.PushMessage(telegramfake.DM(owner, "explain"))
	e.srv.Wait(t, "all chunks", func() bool {
		return len(e.srv.Visible(owner)) >= 3 && len(e.agent.received()) == 1 && strings.Contains(strings.Join(e.srv.Visible(owner), "\n"), codeLines[len(codeLines)-1])
	})
	for _, c := range e.srv.Calls("sendMessage") {
		if c.Status != 200 {
			t.Errorf("sendMessage refused: %d %s", c.Status, c.Error)
		}
	}
	all := strings.Join(e.srv.Visible(owner), "\n")
	for _, line := range codeLines {
		if !strings.Contains(all, line) {
			t.Fatalf("code line lost: %q", line)
		}
	}
	for i, m := range e.srv.Sent(owner) {
		if telegram.UTF16Len(m.Visible) > telegram.MaxMessageLen || strings.Count(m.Text, "<pre>") != strings.Count(m.Text, "</pre>") {
			t.Errorf("chunk %d: %d units, pre balanced=%v", i, telegram.UTF16Len(m.Visible), strings.Count(m.Text, "<pre>") == strings.Count(m.Text, "</pre>"))
		}
	}
}

// drive publishes outbound messages directly, as the agent does mid-turn.
func (e *env) publish(t *testing.T, msgs ...bus.OutboundMessage) {
	t.Helper()
	for _, m := range msgs {
		m.Channel, m.ChatID = telegram.Name, strconv.Itoa(owner)
		if m.TurnID == "" {
			m.TurnID = "t1"
		}
		if err := e.bus.PublishOutbound(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// tick waits for the manager to arm its timer, then moves the fake clock.
func (e *env) tick(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !e.clk.WaitForTimers(ctx, 1) {
		t.Fatal("manager never armed a timer")
	}
	e.clk.Advance(d)
}

func edits(s *telegramfake.Server) []telegramfake.Call {
	var out []telegramfake.Call
	for _, c := range s.Calls("editMessageText") {
		if c.Status == 200 {
			out = append(out, c)
		}
	}
	return out
}

func TestStreamingEditsThrottledAndFinalComplete(t *testing.T) {
	e := start(t, opts{fakeClk: true, reply: func(bus.InboundMessage) []bus.OutboundMessage { return nil }})
	e.publish(t, bus.OutboundMessage{Kind: bus.KindStart}, bus.OutboundMessage{Kind: bus.KindDraft, Content: "Hel"})
	e.srv.Wait(t, "first draft", func() bool { return len(e.srv.Visible(owner)) == 1 })
	for _, d := range []string{"Hello", "Hello **wor", "Hello **world** and", "Hello **world** and more"} {
		e.publish(t, bus.OutboundMessage{Kind: bus.KindDraft, Content: d})
	}
	e.publish(t, bus.OutboundMessage{Kind: bus.KindStatus, Content: "searching the web"})
	if n := len(e.srv.Calls("editMessageText")); n != 0 {
		t.Fatalf("%d edits before a second passed", n)
	}
	// Each second of the fake clock brings at most one edit, showing what
	// the manager has routed by then: usually every draft above, so one
	// edit. The test cannot know when the last draft left the bus, so it
	// ticks until the newest is shown rather than assuming one tick.
	want := "Hello world and more\n\n… searching the web"
	ticks := 0
	for e.srv.Visible(owner)[0] != want {
		if ticks == 5 {
			t.Fatalf("draft shown = %q after %d seconds: want the newest draft as plain text, with the tool hint", e.srv.Visible(owner)[0], ticks)
		}
		before := len(edits(e.srv))
		e.tick(t, time.Second)
		ticks++
		e.srv.Wait(t, "a throttled edit", func() bool { return len(edits(e.srv)) > before })
		if n := len(edits(e.srv)); n != ticks {
			t.Fatalf("%d edits in %d seconds: want one a second at most", n, ticks)
		}
	}
	final := "Hello **world** and more, done."
	e.publish(t, bus.OutboundMessage{Kind: bus.KindFinal, Content: final})
	e.srv.Wait(t, "final edit", func() bool { return len(edits(e.srv)) == ticks+1 })
	sent := e.srv.Sent(owner)
	if len(sent) != 1 || sent[0].Visible != "Hello world and more, done." || sent[0].ParseMode != "HTML" {
		t.Fatalf("after final: %+v", sent)
	}
}

func TestRateLimitDuringStreamingAndSend(t *testing.T) {
	e := start(t, opts{fakeClk: true, reply: func(bus.InboundMessage) []bus.OutboundMessage { return nil }})
	e.publish(t, bus.OutboundMessage{Kind: bus.KindDraft, Content: "one"})
	e.srv.Wait(t, "first draft", func() bool { return len(e.srv.Visible(owner)) == 1 })
	e.srv.Inject("editMessageText", telegramfake.Fault{Kind: telegramfake.RateLimit, RetryAfter: 3})
	e.publish(t, bus.OutboundMessage{Kind: bus.KindDraft, Content: "one two"})
	e.tick(t, time.Second)
	e.srv.Wait(t, "refused edit", func() bool { return len(e.srv.Calls("editMessageText")) == 1 })
	e.publish(t, bus.OutboundMessage{Kind: bus.KindDraft, Content: "one two three"})
	// The exact pause is pinned by the manager's unit tests; here the draft
	// must converge to the newest text once time passes retry_after.
	for i := 0; e.srv.Visible(owner)[0] != "one two three"; i++ {
		if i == 10 {
			t.Fatalf("draft stuck at %q after the pause", e.srv.Visible(owner)[0])
		}
		before := len(edits(e.srv))
		e.tick(t, time.Second)
		if i >= 2 { // past retry_after (3s), each tick brings an edit
			e.srv.Wait(t, "an edit", func() bool { return len(edits(e.srv)) > before })
		}
	}
	// A 429 on the final's extra chunk: it is retried after retry_after and
	// sent exactly once.
	answer, codeLines := longAnswer()
	e.srv.Inject("sendMessage", telegramfake.Fault{Kind: telegramfake.RateLimit, RetryAfter: 2})
	e.publish(t, bus.OutboundMessage{Kind: bus.KindFinal, Content: answer})
	e.srv.Wait(t, "rate-limited send", func() bool { return len(e.srv.Calls("sendMessage")) == 2 })
	e.tick(t, 2*time.Second)
	e.srv.Wait(t, "whole answer", func() bool {
		return strings.Contains(strings.Join(e.srv.Visible(owner), ""), codeLines[len(codeLines)-1])
	})
	seen := map[string]bool{}
	for _, v := range e.srv.Visible(owner) {
		if seen[v] {
			t.Fatalf("a chunk was sent twice: %.60q", v)
		}
		seen[v] = true
	}
	if got := len(e.srv.Sent(owner)); got != len(telegram.NewRenderer().RenderChunks(answer)) {
		t.Fatalf("%d messages, want one per chunk", got)
	}
}

func TestPollingStallRecovered(t *testing.T) {
	e := start(t, opts{})
	e.srv.Inject("getUpdates", telegramfake.Fault{Kind: telegramfake.Stall})
	e.srv.Wait(t, "a stalled poll", func() bool {
		for _, c := range e.srv.Calls("getUpdates") {
			if c.Error == "stalled" {
				return true
			}
		}
		return false
	})
	e.srv.PushMessage(telegramfake.DM(owner, "are you there?"))
	e.srv.Wait(t, "answer after the stall", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if e.ch.Stalls() < 1 {
		t.Fatal("the watchdog did not count the stall")
	}
}

// A quiet bot's long poll only returns at poll_timeout: the channel is
// ready as soon as Telegram accepts polling, while that first long poll is
// still pending, not when it returns.
func TestReadyWhileTheFirstLongPollIsPending(t *testing.T) {
	e := start(t, opts{cfg: func(c *telegram.Config) { c.PollTimeout = 30 * time.Second }})
	e.srv.Wait(t, "a long poll in flight", func() bool { return e.srv.LongPolls() == 1 })
	if err := e.ch.Healthy(); err != nil {
		t.Fatalf("Healthy() = %v while polling, want ready", err)
	}
	for _, c := range e.srv.Calls("getUpdates") {
		if c.Params["timeout"] != "0" {
			t.Fatalf("a long poll returned (%v) before the test ended: the fake should hold it for 30s", c.Params)
		}
	}
	// Messages still arrive through the pending long poll.
	e.srv.PushMessage(telegramfake.DM(owner, "hi"))
	e.srv.Wait(t, "the echo", func() bool { return len(e.srv.Visible(owner)) == 1 })
}

// A failed poll makes the channel not ready; the next short poll that
// answers makes it ready again, without waiting for a long poll to end.
func TestNotReadyAfterAFailedPollUntilTelegramAnswers(t *testing.T) {
	e := start(t, opts{cfg: func(c *telegram.Config) { c.PollTimeout = 30 * time.Second }})
	e.srv.Wait(t, "a long poll in flight", func() bool { return e.srv.LongPolls() == 1 })
	// Two failures in a row: the channel is not ready through both backoffs.
	e.srv.Inject("getUpdates", telegramfake.Fault{Kind: telegramfake.ServerError, Times: 2})
	e.srv.PushMessage(telegramfake.DM(owner, "wake up")) // ends the long poll; the next calls fail
	waitHealth(t, e.ch, func(err error) bool { return err != nil && strings.Contains(err.Error(), "502") })
	e.srv.Wait(t, "the retried poll and the next long poll", func() bool { return e.srv.LongPolls() == 1 && e.ch.Healthy() == nil })
	var afterFailure []string
	failed := false
	for _, c := range e.srv.Calls("getUpdates") {
		if failed {
			afterFailure = append(afterFailure, c.Params["timeout"])
		}
		failed = failed || c.Status == 502
	}
	if len(afterFailure) == 0 || afterFailure[0] != "0" {
		t.Errorf("timeouts of the polls after the failure = %v, want a short poll first", afterFailure)
	}
}

func TestConflictReported(t *testing.T) {
	e := start(t, opts{})
	e.srv.Inject("getUpdates", telegramfake.Fault{Kind: telegramfake.Conflict})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := e.ch.Healthy(); err != nil && strings.Contains(err.Error(), "only one may poll per token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Healthy() = %v, want the conflict explained", e.ch.Healthy())
		}
		time.Sleep(5 * time.Millisecond) // polling an async condition
	}
}

// waitHealth polls the channel's health until ok accepts it.
func waitHealth(t *testing.T, ch *telegram.Channel, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(ch.Healthy()) {
		if time.Now().After(deadline) {
			t.Fatalf("Healthy() = %v, not the state waited for", ch.Healthy())
		}
		time.Sleep(2 * time.Millisecond) // polling an async condition
	}
}

var jpeg = append([]byte{0xff, 0xd8, 0xff, 0xe0}, bytes.Repeat([]byte("photo"), 100)...)

func TestPhotoReachesTheAgentAsImage(t *testing.T) {
	e := start(t, opts{})
	small := e.srv.AddFile("photos/small.jpg", jpeg[:20])
	large := e.srv.AddFile("photos/large.jpg", jpeg)
	m := telegramfake.DM(owner, "")
	m.Caption = "what is this?"
	m.Photo = []models.PhotoSize{{FileID: small, Width: 90, Height: 90, FileSize: 20}, {FileID: large, Width: 800, Height: 600, FileSize: len(jpeg)}}
	e.srv.PushMessage(m)
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	got := e.agent.received()[0]
	if got.Content != "what is this?" || len(got.Media) != 1 || got.Media[0].Kind != llm.PartImage ||
		!bytes.Equal(got.Media[0].Image.Data, jpeg) || got.Media[0].Image.MIME != "image/jpeg" {
		t.Fatalf("agent got content %q media %+v", got.Content, got.Media)
	}
}

func TestAlbumMergedIntoOneMessage(t *testing.T) {
	// The parts may come in two polls, and a loaded machine may take more
	// than the environment's 100 ms between them: the album waits as long
	// as it does in production.
	e := start(t, opts{deps: func(d *telegram.Deps) { d.AlbumWait = 1500 * time.Millisecond }})
	a, b := e.srv.AddFile("photos/a.jpg", jpeg), e.srv.AddFile("photos/b.jpg", jpeg[:50])
	for i, id := range []string{a, b} {
		m := telegramfake.DM(owner, "")
		m.MediaGroupID = "album1"
		if i == 0 {
			m.Caption = "two pictures"
		}
		m.Photo = []models.PhotoSize{{FileID: id, Width: 100, Height: 100}}
		e.srv.PushMessage(m)
	}
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	got := e.agent.received()
	if len(got) != 1 || len(got[0].Media) != 2 || got[0].Content != "two pictures" {
		t.Fatalf("agent got %d messages, first with %d media %q", len(got), len(got[0].Media), got[0].Content)
	}
}

func TestDocumentSavedInInbox(t *testing.T) {
	e := start(t, opts{})
	data := []byte("%PDF-1.4 pretend report")
	m := telegramfake.DM(owner, "")
	m.Caption = "summarise"
	m.Document = &models.Document{FileID: e.srv.AddFile("docs/r.pdf", data), FileName: "Q3 report.pdf", MimeType: "application/pdf", FileSize: int64(len(data))}
	e.srv.PushMessage(m)
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	got := e.agent.received()[0].Media
	if len(got) != 1 || got[0].Kind != llm.PartFileRef || !strings.HasPrefix(got[0].File.Path, "inbox/") || got[0].File.Name != "Q3 report.pdf" {
		t.Fatalf("media = %+v", got)
	}
	saved, err := os.ReadFile(filepath.Join(e.work, got[0].File.Path))
	if err != nil || !bytes.Equal(saved, data) {
		t.Fatalf("saved file: %v", err)
	}
}

func TestVoiceTranscribed(t *testing.T) {
	var gotModel, gotAuth string
	var gotAudio []byte
	tr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" {
			http.NotFound(w, r)
			return
		}
		gotAuth = r.Header.Get("Authorization")
		gotModel = r.FormValue("model")
		f, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		gotAudio, _ = io.ReadAll(f)
		_ = json.NewEncoder(w).Encode(map[string]string{"text": "remind me to water the plants"})
	}))
	defer tr.Close()
	e := start(t, opts{deps: func(d *telegram.Deps) {
		d.Transcription = config.TranscriptionConfig{BaseURL: tr.URL + "/v1", APIKey: "k", Model: "whisper-1"}
	}})
	audio := []byte("OggS pretend opus")
	m := telegramfake.DM(owner, "")
	m.Voice = &models.Voice{FileID: e.srv.AddFile("voice/v.oga", audio), Duration: 2, MimeType: "audio/ogg", FileSize: int64(len(audio))}
	e.srv.PushMessage(m)
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if got := e.agent.received()[0].Content; got != "[voice message] remind me to water the plants" {
		t.Fatalf("content = %q", got)
	}
	if gotModel != "whisper-1" || gotAuth != "Bearer k" || !bytes.Equal(gotAudio, audio) {
		t.Fatalf("transcription request: model %q auth %q audio %q", gotModel, gotAuth, gotAudio)
	}
}

func TestVoiceWithoutTranscriptionTellsTheUser(t *testing.T) {
	e := start(t, opts{})
	m := telegramfake.DM(owner, "")
	m.Voice = &models.Voice{FileID: e.srv.AddFile("voice/v.oga", []byte("x")), FileSize: 1}
	id := e.srv.PushMessage(m)
	e.srv.Wait(t, "notice", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if got := e.srv.Visible(owner)[0]; !strings.Contains(got, "transcription is off") {
		t.Fatalf("notice = %q", got)
	}
	e.waitAcked(t, id)
	if len(e.agent.received()) != 0 {
		t.Fatal("an empty voice message reached the agent")
	}
}

func TestForumTopicSessionAndReplies(t *testing.T) {
	e := start(t, opts{})
	const chat = -1001
	m := telegramfake.Mention(chat, owner, "hi topic")
	m.IsTopicMessage, m.MessageThreadID = true, 7
	e.srv.PushMessage(m)
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(chat)) == 1 })
	if got := e.agent.received()[0]; got.Key() != "telegram:-1001:topic:7" {
		t.Fatalf("session key = %q", got.Key())
	}
	if got := e.srv.Sent(chat)[0]; got.ThreadID != 7 {
		t.Fatalf("reply went to thread %d, want 7", got.ThreadID)
	}
	for _, c := range e.srv.Calls("sendChatAction") {
		if c.Params["message_thread_id"] != "7" {
			t.Fatalf("typing shown outside the topic: %+v", c.Params)
		}
	}
}

func TestBadMarkupResentAsPlain(t *testing.T) {
	e := start(t, opts{reply: func(m bus.InboundMessage) []bus.OutboundMessage { return turn(m, "**bold** answer") }})
	e.srv.Inject("sendMessage", telegramfake.Fault{Kind: telegramfake.BadEntities})
	e.srv.PushMessage(telegramfake.DM(owner, "q"))
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	sent := e.srv.Sent(owner)
	if len(sent) != 1 || sent[0].ParseMode != "" || sent[0].Visible != "bold answer" {
		t.Fatalf("sent = %+v, want one plain message", sent)
	}
}

func TestOutboundMediaFromTheMessageTool(t *testing.T) {
	e := start(t, opts{reply: func(m bus.InboundMessage) []bus.OutboundMessage {
		out := bus.OutboundMessage{Channel: m.Channel, ChatID: m.ChatID, Kind: bus.KindMessage, Content: "here you go",
			Media: []llm.Part{
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: []byte("\x89PNG fake")}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "notes.txt"}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "../outside.txt"}}, // refused: leaves the workspace
			}}
		return []bus.OutboundMessage{out}
	}})
	if err := os.WriteFile(filepath.Join(e.work, "notes.txt"), []byte("notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.srv.PushMessage(telegramfake.DM(owner, "send me the chart"))
	e.srv.Wait(t, "photo and document", func() bool { return len(e.srv.Sent(owner)) == 3 })
	sent := e.srv.Sent(owner)
	if sent[0].Visible != "here you go" || string(sent[1].Photo) != "\x89PNG fake" ||
		string(sent[2].Document) != "notes" || sent[2].FileName != "notes.txt" {
		t.Fatalf("sent = %+v", sent)
	}
}

func TestRestartNeitherLosesNorRepeats(t *testing.T) {
	srv := telegramfake.New(t)
	data, work := t.TempDir(), t.TempDir()
	// First run: the agent receives the message but "crashes" before
	// recording it (no ack).
	e1 := start(t, opts{srv: srv, data: data, work: work, noAck: true, reply: func(bus.InboundMessage) []bus.OutboundMessage { return nil }})
	id := srv.PushMessage(telegramfake.DM(owner, "important"))
	srv.Wait(t, "polled past it", func() bool { return srv.Confirmed() > id })
	deadline := time.Now().Add(5 * time.Second)
	for len(e1.agent.received()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("first run never delivered the message")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e1.stop()
	// Second run: Telegram will not redeliver (confirmed), but the journal
	// replays it, and this time it is answered and acknowledged.
	e2 := start(t, opts{srv: srv, data: data, work: work})
	srv.Wait(t, "answer after restart", func() bool { return len(srv.Visible(owner)) == 1 })
	e2.waitAcked(t, id)
	e2.stop()
	// Third run: nothing left to replay.
	e3 := start(t, opts{srv: srv, data: data, work: work})
	srv.PushMessage(telegramfake.DM(owner, "next"))
	srv.Wait(t, "next answer", func() bool { return len(srv.Visible(owner)) == 2 })
	if got := e3.agent.received(); len(got) != 1 || got[0].Content != "next" {
		t.Fatalf("third run got %+v: the acknowledged message was replayed", got)
	}
	if got := srv.Visible(owner); got[0] != "echo: important" || got[1] != "echo: next" {
		t.Fatalf("visible = %q", got)
	}
}

func TestWebhookMode(t *testing.T) {
	e := start(t, opts{cfg: func(c *telegram.Config) {
		c.Mode, c.WebhookURL, c.WebhookSecret = "webhook", "https://bot.example.com/tg/hook", "s3cret"
	}})
	path, h := e.ch.WebhookHandler()
	if path != "/tg/hook" {
		t.Fatalf("path = %q", path)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	gw := httptest.NewServer(mux)
	defer gw.Close()
	e.srv.Wait(t, "setWebhook", func() bool { u, s := e.srv.Webhook(); return u != "" && s == "s3cret" })
	msg := telegramfake.DM(owner, "via webhook")
	msg.ID = 42
	body, _ := json.Marshal(models.Update{ID: 5001, Message: &msg})
	post := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+path, bytes.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("wrong"); code != http.StatusForbidden {
		t.Fatalf("wrong secret: %d", code)
	}
	if code := post("s3cret"); code != http.StatusOK {
		t.Fatalf("right secret: %d", code)
	}
	e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
	if code := post("s3cret"); code != http.StatusOK { // Telegram redelivers
		t.Fatalf("redelivery: %d", code)
	}
	// A redelivery is recognised while journaling, before the 200.
	if n := len(e.agent.received()); n != 1 {
		t.Fatalf("redelivered update answered %d times", n)
	}
}

// BenchmarkFirstVisibleText measures, over loopback through the fake Bot
// API, the time from an update being available to getUpdates until the
// answer of an instant stand-in agent is visible in the chat: long-poll
// wake-up, journal write (fsync), intake, bus, typing call, render, send.
// "no-journal" runs without a data dir, to show the fsync's share.
func BenchmarkFirstVisibleText(b *testing.B) {
	for _, journal := range []bool{true, false} {
		name := "journal"
		if !journal {
			name = "no-journal"
		}
		b.Run(name, func(b *testing.B) {
			e := start(b, opts{log: zap.NewNop(), cfg: func(c *telegram.Config) { c.PollTimeout = 10 * time.Second },
				deps: func(d *telegram.Deps) {
					d.Limits.RatePerMinute = 1 << 30
					if !journal {
						d.DataDir = ""
					}
				}})
			n := 0
			for b.Loop() {
				n++
				e.srv.PushMessage(telegramfake.DM(owner, "ping"))
				e.srv.Wait(b, "answer", func() bool { return len(e.srv.Sent(owner)) >= n })
			}
		})
	}
}

// BenchmarkStreamingEdits streams drafts every 10 ms for 3 s through the
// real clock and reports the edits per second that reach Telegram.
func BenchmarkStreamingEdits(b *testing.B) {
	for b.Loop() {
		e := start(b, opts{log: zap.NewNop(), reply: func(bus.InboundMessage) []bus.OutboundMessage { return nil }})
		ctx := context.Background()
		base := bus.OutboundMessage{Channel: telegram.Name, ChatID: strconv.Itoa(owner), TurnID: "t"}
		began := time.Now()
		text := ""
		for time.Since(began) < 3*time.Second {
			text += "word "
			d := base
			d.Kind, d.Content = bus.KindDraft, text
			_ = e.bus.PublishOutbound(ctx, d)
			time.Sleep(10 * time.Millisecond) // the model's token pace, not a test wait
		}
		elapsed := time.Since(began)
		n := 0
		for _, c := range e.srv.Calls("editMessageText") {
			if c.Status == 200 {
				n++
			}
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "edits/s")
		e.stop()
	}
}

// A model takes images, not video: a video, an animation or a video
// message reaches it described, with Telegram's thumbnail (one still frame)
// as an image part and a line saying what the picture is; without a
// thumbnail it is only described.
func TestVideoThumbnailReachesTheAgentAsImage(t *testing.T) {
	for _, tc := range []struct {
		name, what string
		set        func(m *models.Message, thumb *models.PhotoSize)
	}{
		{"video", "video", func(m *models.Message, th *models.PhotoSize) {
			m.Video = &models.Video{FileID: "v", FileName: "clip.mp4", Duration: 12, Width: 1280, Height: 720, Thumbnail: th}
		}},
		{"animation", "animation", func(m *models.Message, th *models.PhotoSize) {
			m.Animation = &models.Animation{FileID: "a", FileName: "cat.gif.mp4", Duration: 3, Thumbnail: th}
		}},
		{"video note", "video message", func(m *models.Message, th *models.PhotoSize) {
			m.VideoNote = &models.VideoNote{FileID: "n", Duration: 7, Length: 240, Thumbnail: th}
		}},
	} {
		for _, withThumb := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/thumbnail=%v", tc.name, withThumb), func(t *testing.T) {
				e := start(t, opts{})
				m := telegramfake.DM(owner, "")
				var th *models.PhotoSize
				if withThumb {
					th = &models.PhotoSize{FileID: e.srv.AddFile("thumbs/t.jpg", jpeg), Width: 320, Height: 180, FileSize: len(jpeg)}
				}
				tc.set(&m, th)
				e.srv.PushMessage(m)
				e.srv.Wait(t, "answer", func() bool { return len(e.srv.Visible(owner)) == 1 })
				got := e.agent.received()[0]
				if !strings.Contains(got.Content, tc.what) {
					t.Errorf("content %q does not describe the %s", got.Content, tc.what)
				}
				note := "the " + tc.what + "'s thumbnail: one still frame"
				if !withThumb {
					if len(got.Media) != 0 || strings.Contains(got.Content, note) {
						t.Errorf("without a thumbnail: content %q, media %+v", got.Content, got.Media)
					}
					return
				}
				if len(got.Media) != 1 || got.Media[0].Kind != llm.PartImage || !bytes.Equal(got.Media[0].Image.Data, jpeg) ||
					!strings.Contains(got.Content, note) {
					t.Fatalf("agent got content %q media %+v; want the thumbnail as an image and the note", got.Content, got.Media)
				}
			})
		}
	}
}
