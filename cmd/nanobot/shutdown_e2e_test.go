package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// TestGatewayShutdownAnswersOnceOrLeavesAnswerable runs the real binary
// against fake Telegram and OpenAI servers with two turn slots and a 5s
// grace period, and sends SIGTERM with:
//
//	A (chat 101) in flight, finishing after the signal: answered in time;
//	B (chat 102) in flight and too slow: cut at the grace period;
//	C, D (103, 104) waiting for a model slot (saved, not yet answered);
//	E (105) sent to Telegram after the signal.
//
// Then it checks: exit 0; A answered exactly once; B, C and D silent for
// now, their messages saved but not acknowledged (Telegram redelivers, so
// the turns resume after the restart rather than asking the user to repeat);
// every session line complete; B, C, D and E still pending in the update
// journal. After a restart each of them is answered exactly once — the
// interrupted turns from their saved messages, without saving them twice —
// and nothing is pending.
func TestGatewayShutdownAnswersOnceOrLeavesAnswerable(t *testing.T) {
	e := newEnv(t)
	tg := telegramfake.New(t)
	const a, b, c, d, late = 101, 102, 103, 104, 105
	releaseA := make(chan struct{})
	var restarted atomic.Bool
	e.script.Func = func(r fakellm.Request) fakellm.Reply {
		text := r.LastUserText()
		switch {
		case restarted.Load():
			return fakellm.Reply{Text: "answer to " + tag(text)}
		case strings.Contains(text, "A: quick"):
			select {
			case <-releaseA:
			case <-time.After(30 * time.Second):
			}
			return fakellm.Reply{Text: "answer to A"}
		case strings.Contains(text, "E: after"):
			return fakellm.Reply{Text: "answer to E"}
		}
		return fakellm.Reply{Text: "too late", Delay: time.Minute} // cancelled with the request
	}
	extra := append(telegramEnv(tg, a, b, c, d, late),
		"NANOBOT_GATEWAY_SHUTDOWN_GRACE=5s", "NANOBOT_AGENTS_MAX_CONCURRENT_TURNS=2")

	p := e.startGateway(extra)
	p.waitReady()
	tg.PushMessage(telegramfake.DM(a, "A: quick question"))
	tg.PushMessage(telegramfake.DM(b, "B: long job"))
	waitUntil(t, "A and B in flight", 10*time.Second, func() bool { return len(e.script.Requests()) == 2 })
	tg.PushMessage(telegramfake.DM(c, "C: waiting"))
	lastQueued := tg.PushMessage(telegramfake.DM(d, "D: waiting"))
	// Telegram is told an update arrived (offset past it) only once the
	// adapter journaled it and handed it on.
	waitUntil(t, "C and D accepted", 10*time.Second, func() bool { return tg.Confirmed() > lastQueued })

	p.signal(syscall.SIGTERM)
	signalled := time.Now()
	tg.PushMessage(telegramfake.DM(late, "E: after the signal"))
	close(releaseA)
	if code := p.wait(40 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	// grace + outbound flush bound + listener and tools: well under 20s more.
	if d := time.Since(signalled); d > 25*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	if _, ok := p.logLine("grace period over; cancelling the turns still running"); !ok {
		t.Error("the log does not say the grace period ran out")
	}

	if got := tg.Visible(a); !slices.Equal(got, []string{"answer to A"}) {
		t.Errorf("A saw %q, want its answer exactly once", got)
	}
	for _, chat := range []int64{b, c, d} {
		if v := tg.Visible(chat); len(v) != 0 {
			t.Errorf("chat %d saw %q before the restart; an interrupted turn resumes after it", chat, v)
		}
	}
	if got := tg.Visible(late); len(got) > 1 {
		t.Errorf("E saw %q", got)
	}

	// B was cut in its model call; C and D waited for a model slot (the cap
	// is on model calls, so their messages were saved first). None was
	// acknowledged: all three come back after the restart.
	sessions := e.sessions()
	roles := checkSessionFiles(t, sessions)
	for chat, want := range map[int64]string{a: "user,assistant", b: "user", c: "user", d: "user"} {
		if got := strings.Join(roles[sessionFile(chat)], ","); got != want {
			t.Errorf("session of chat %d = %q, want %q", chat, got, want)
		}
	}
	pending := journalPending(t, filepath.Join(e.home, ".nanobot", "telegram-updates.json"))
	for _, chat := range []int64{b, c, d} {
		if !slices.Contains(pending, chat) {
			t.Errorf("update journal pending chats = %v, want chat %d kept for the restart", pending, chat)
		}
	}
	if slices.Contains(pending, a) {
		t.Errorf("chat %d was answered but is still pending: it would be answered twice", a)
	}

	// Restart: what was left is answered, exactly once.
	restarted.Store(true)
	p2 := e.startGateway(extra)
	p2.waitReady()
	// Replies stream by editing one message: wait for the final text.
	want := map[int64]string{b: "answer to B: long job", c: "answer to C: waiting", d: "answer to D: waiting", late: "answer to E: after the signal"}
	tg.Wait(t, "the interrupted and left-over messages answered", func() bool {
		for chat, w := range want {
			if !slices.Equal(tg.Visible(chat), []string{w}) {
				return false
			}
		}
		return true
	})
	p2.signal(syscall.SIGTERM)
	if code := p2.wait(30 * time.Second); code != 0 {
		t.Fatalf("second run exit code %d", code)
	}
	for chat, n := range map[int64]int{a: 1, b: 1, c: 1, d: 1, late: 1} {
		if got := tg.Visible(chat); len(got) != n {
			t.Errorf("chat %d saw %q, want %d message(s): nothing answered twice", chat, got, n)
		}
	}
	roles = checkSessionFiles(t, sessions)
	for _, chat := range []int64{b, c, d} {
		if got := strings.Join(roles[sessionFile(chat)], ","); got != "user,assistant" {
			t.Errorf("session of resumed chat %d = %q, want the saved message once and its answer", chat, got)
		}
	}
	if pending := journalPending(t, filepath.Join(e.home, ".nanobot", "telegram-updates.json")); len(pending) != 0 {
		t.Errorf("updates still pending after a clean run: chats %v", pending)
	}
}

// tag is the "X: ..." part of a user message (after the context prefix).
func tag(text string) string {
	if i := strings.LastIndex(text, "\n"); i >= 0 {
		return text[i+1:]
	}
	return text
}

// journalPending returns the chat ids of the updates the Telegram adapter
// keeps for replay.
func journalPending(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Pending []struct {
			Message struct {
				Chat struct {
					ID int64 `json:"id"`
				} `json:"chat"`
			} `json:"message"`
		} `json:"pending"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatalf("update journal: %v", err)
	}
	var chats []int64
	for _, u := range j.Pending {
		chats = append(chats, u.Message.Chat.ID)
	}
	return chats
}
