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

	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
)

// TestGatewayShutdownAnswersOnceOrLeavesAnswerable runs the real binary
// against fake Telegram and OpenAI servers with two turn slots and a 5s
// grace period, and sends SIGTERM with:
//
//	A (chat 101) in flight, finishing after the signal: answered in time;
//	B (chat 102) in flight and too slow: cut at the grace period;
//	C, D (103, 104) waiting for a slot: when A ends one of them starts
//	  (and is cut like B), the other never starts;
//	E (105) sent to Telegram after the signal.
//
// Then it checks: exit 0; A answered exactly once; B and the started one of
// C/D told they were interrupted, their messages saved; every session line
// complete; the never-started message and E still pending in the update
// journal. After a restart those two are answered, nothing is answered
// twice, and "continue" in B's chat reaches the model with B's message in
// the history.
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
	tg.PushMessage(dm(a, "A: quick question"))
	tg.PushMessage(dm(b, "B: long job"))
	waitUntil(t, "A and B in flight", 10*time.Second, func() bool { return len(e.script.Requests()) == 2 })
	tg.PushMessage(dm(c, "C: waiting"))
	lastQueued := tg.PushMessage(dm(d, "D: waiting"))
	// Telegram is told an update arrived (offset past it) only once the
	// adapter journaled it and handed it on.
	waitUntil(t, "C and D accepted", 10*time.Second, func() bool { return tg.Confirmed() > lastQueued })

	p.signal(syscall.SIGTERM)
	signalled := time.Now()
	tg.PushMessage(dm(late, "E: after the signal"))
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
	notice := func(chat int64) bool {
		v := tg.Visible(chat)
		return len(v) == 1 && strings.Contains(v[0], "restarted") && strings.Contains(v[0], "continue")
	}
	if !notice(b) {
		t.Errorf("B saw %q, want one interruption notice", tg.Visible(b))
	}
	started, waiting := int64(c), int64(d)
	if len(tg.Visible(d)) > 0 {
		started, waiting = d, c
	}
	if !notice(started) || len(tg.Visible(waiting)) != 0 {
		t.Errorf("C saw %q and D saw %q: want a notice for the one that started and nothing for the other",
			tg.Visible(c), tg.Visible(d))
	}
	if got := tg.Visible(late); len(got) > 1 {
		t.Errorf("E saw %q", got)
	}

	sessions := filepath.Join(e.workspace(), "sessions")
	roles := checkSessionFiles(t, sessions)
	for chat, want := range map[int64]string{a: "user,assistant", b: "user", started: "user"} {
		if got := strings.Join(roles[sessionFile(chat)], ","); got != want {
			t.Errorf("session of chat %d = %q, want %q", chat, got, want)
		}
	}
	if got := roles[sessionFile(waiting)]; len(got) != 0 {
		t.Errorf("the message that never started was persisted: %v", got)
	}
	pending := journalPending(t, filepath.Join(e.home, ".nanobot", "telegram-updates.json"))
	if !slices.Contains(pending, waiting) {
		t.Errorf("update journal pending chats = %v, want the never-started chat %d kept for the restart", pending, waiting)
	}
	for _, chat := range []int64{a, b, started} {
		if slices.Contains(pending, chat) {
			t.Errorf("chat %d's message is still pending although it was saved: it would be answered twice", chat)
		}
	}

	// Restart: what was left is answered, exactly once.
	restarted.Store(true)
	p2 := e.startGateway(extra)
	p2.waitReady()
	// Replies stream by editing one message: wait for the final text.
	wantWaiting := "answer to " + map[int64]string{c: "C: waiting", d: "D: waiting"}[waiting]
	tg.Wait(t, "the left-over messages answered", func() bool {
		w, l := tg.Visible(waiting), tg.Visible(late)
		return slices.Equal(w, []string{wantWaiting}) && len(l) == 1 && strings.HasPrefix(l[0], "answer to E")
	})
	tg.PushMessage(dm(b, "continue"))
	tg.Wait(t, "B's continuation", func() bool {
		v := tg.Visible(b)
		return len(v) == 2 && v[1] == "answer to continue"
	})
	var cont *fakellm.Request
	for _, r := range e.script.Requests() {
		if strings.Contains(r.LastUserText(), "continue") {
			cont = &r
		}
	}
	if cont == nil || !strings.Contains(string(cont.Raw), "B: long job") {
		t.Errorf("the continuation request does not carry B's saved message")
	}
	p2.signal(syscall.SIGTERM)
	if code := p2.wait(30 * time.Second); code != 0 {
		t.Fatalf("second run exit code %d", code)
	}
	for chat, n := range map[int64]int{a: 1, b: 2, started: 1, waiting: 1, late: 1} {
		if got := tg.Visible(chat); len(got) != n {
			t.Errorf("chat %d saw %q, want %d message(s): nothing answered twice", chat, got, n)
		}
	}
	checkSessionFiles(t, sessions)
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
