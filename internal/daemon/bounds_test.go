package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// Bounds on everything a stranger — or an over-eager friend — can send,
// checked end to end through the gateway (issue 9).

// echoLast answers "got: <the user's text after the context prefix>".
func echoLast(r fakellm.Request) fakellm.Reply {
	text := r.LastUserText()
	if i := strings.Index(text, "]\n"); i >= 0 {
		text = text[i+2:]
	}
	return fakellm.Reply{Text: "got: " + strings.ReplaceAll(text, "\n", " ")}
}

func TestLongMessageIsCutWithOneNote(t *testing.T) {
	g := startWith(t, setup{agents: "max_input_chars: 1000"})
	g.script.Push(fakellm.Reply{Text: "That was long."})
	g.tg.PushMessage(telegramfake.DM(owner, strings.Repeat("x", 4000)))
	g.waitLast(owner, "That was long.")
	text := g.script.Requests()[0].LastUserText()
	body := text[strings.Index(text, "]\n")+2:]
	if n := utf8.RuneCountInString(body); n > 1000 {
		t.Errorf("the model got %d characters of the message, more than max_input_chars 1000", n)
	}
	if !strings.HasSuffix(body, "[message truncated: 950 of 4000 characters kept]") || strings.Count(body, "truncated")+strings.Count(body, "cut") != 1 {
		t.Errorf("want one note giving the true length, got …%q", body[max(0, len(body)-120):])
	}
}

func TestAttachmentsOverTheCapAreNotDownloaded(t *testing.T) {
	g := startWith(t, setup{telegram: "max_media_bytes: 1024"})
	g.script.Push(fakellm.Reply{Text: "Too big, sorry."})
	big := bytes.Repeat([]byte("A"), 4096)
	m := telegramfake.DM(owner, "")
	m.Caption = "two files"
	m.Document = &models.Document{FileID: g.tg.AddFile("docs/big.pdf", big), FileName: "big.pdf", FileSize: int64(len(big))}
	// A photo whose announced size lies: the download itself is capped.
	m.Photo = []models.PhotoSize{{FileID: g.tg.AddFile("photos/big.jpg", big), Width: 100, Height: 100, FileSize: 100}}
	g.tg.PushMessage(m)
	g.waitLast(owner, "Too big, sorry.")
	req := g.script.Requests()[0]
	text := req.LastUserText()
	for _, want := range []string{"[the file big.pdf was not downloaded: it is larger than the 1.0 KiB limit]",
		"[the photo was not downloaded: it is larger than the 1.0 KiB limit]"} {
		if !strings.Contains(text, want) {
			t.Errorf("the model was not told %q; got %q", want, text)
		}
	}
	if n := req.Messages[len(req.Messages)-1].Images; n != 0 {
		t.Errorf("%d images reached the model", n)
	}
	if entries, _ := os.ReadDir(filepath.Join(g.cfg.Agents.Workspace, "inbox")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; nothing over the cap may be saved", len(entries))
	}
}

// A chat's queue holds at most agents.max_queue messages while its turn
// runs; older ones are dropped, and the sender is told.
func TestQueueBoundDropsOldestWithANotice(t *testing.T) {
	g := startWith(t, setup{agents: "max_queue: 2"})
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var calls atomic.Int32
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 1 {
			<-gate
		}
		return echoLast(r)
	}
	g.tg.PushMessage(telegramfake.DM(owner, "m0"))
	g.waitUntil("the first turn to run", func() bool { return calls.Load() == 1 })
	for i := 1; i <= 4; i++ {
		g.tg.PushMessage(telegramfake.DM(owner, fmt.Sprintf("m%d", i)))
	}
	g.tg.Wait(t, "two drop notices", func() bool {
		n := 0
		for _, v := range g.tg.Visible(owner) {
			if strings.Contains(v, "I skipped the oldest") {
				n++
			}
		}
		return n == 2
	})
	open()
	g.waitLast(owner, "got: m3 m4")
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, v := range g.tg.Visible(owner) {
		if strings.HasPrefix(v, "got:") {
			answers = append(answers, v)
		}
	}
	if strings.Join(answers, "|") != "got: m0|got: m3 m4" {
		t.Errorf("answers = %q: m1 and m2 must be dropped, m3 and m4 answered together", answers)
	}
	for _, r := range g.script.Requests() {
		for _, dropped := range []string{"\nm1", "\nm2"} {
			if strings.Contains(r.LastUserText(), dropped) {
				t.Errorf("dropped message %q reached the model", dropped)
			}
		}
	}
}

// One sender may send channels.telegram.rate_per_minute messages a minute;
// more are dropped, with one warning.
func TestRatePerMinuteBoundsASender(t *testing.T) {
	g := startWith(t, setup{telegram: "rate_per_minute: 3\nstreaming: false"})
	g.script.Func = echoLast
	for i := range 6 {
		g.tg.PushMessage(telegramfake.DM(owner, fmt.Sprintf("r%d", i)))
	}
	g.tg.Wait(t, "the warning", func() bool {
		for _, v := range g.tg.Visible(owner) {
			if strings.Contains(v, "faster than I can read them") {
				return true
			}
		}
		return false
	})
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	warnings := 0
	var seen []string
	for _, v := range g.tg.Visible(owner) {
		if strings.Contains(v, "faster than I can read them") {
			warnings++
		}
	}
	for _, r := range g.script.Requests() {
		seen = append(seen, r.LastUserText())
	}
	all := strings.Join(seen, " ")
	for i := range 6 {
		if got, want := strings.Contains(all, fmt.Sprintf("\nr%d", i)), i < 3; got != want {
			t.Errorf("r%d reached the model: %v, want %v", i, got, want)
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings, want exactly 1", warnings)
	}
}

// A busy forum group cannot take every turn slot: with
// max_concurrent_turns 2 its topics share one slot and a DM gets the other.
func TestBusyGroupLeavesRoomForDirectMessages(t *testing.T) {
	g := startWith(t, setup{agents: "max_concurrent_turns: 2", telegram: "streaming: false"})
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var inGroup, peak atomic.Int32
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		if !strings.Contains(r.LastUserText(), "topic") {
			return fakellm.Reply{Text: "dm answered"}
		}
		n := inGroup.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-gate
		inGroup.Add(-1)
		return fakellm.Reply{Text: "topic answered"}
	}
	for topic := 1; topic <= 3; topic++ {
		m := telegramfake.Mention(-42, owner, fmt.Sprintf("topic %d", topic))
		m.IsTopicMessage, m.MessageThreadID = true, topic
		g.tg.PushMessage(m)
	}
	g.waitUntil("a topic turn to run", func() bool { return inGroup.Load() == 1 })
	g.tg.PushMessage(telegramfake.DM(owner, "are you there?"))
	g.waitLast(owner, "dm answered") // would wait forever if the topics held both slots
	open()
	g.tg.Wait(t, "every topic answered", func() bool { return len(g.tg.Visible(-42)) == 3 })
	if p := peak.Load(); p != 1 {
		t.Errorf("the group ran %d turns at once, want 1 (max_group_turns defaults to max_concurrent_turns-1)", p)
	}
}
