package channels

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var streaming = config.OutputConfig{Streaming: true, ToolHints: true, EditInterval: time.Second}

func TestFinalWithoutStreamingIsChunked(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	long := strings.Repeat("word ", 20) // 100 runes: three chunks of at most 38
	h.send(3,
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "ignored draft"},
		bus.OutboundMessage{Kind: bus.KindStatus, TurnID: "t", Content: "ignored status"},
		bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: long, ReplyTo: "99"},
	)
	sends := h.ch.ops("send")
	if len(sends) != 3 || len(h.ch.ops("")) != 3 {
		t.Fatalf("calls = %+v, want exactly three sends", h.ch.ops(""))
	}
	var joined string
	for i, c := range sends {
		if c.plain || !strings.HasPrefix(c.text, "<") || len([]rune(c.text)) > 40 {
			t.Errorf("chunk %d = %q: want rendered and within the limit", i, c.text)
		}
		if (i == 0) != (c.reply == "99") {
			t.Errorf("chunk %d reply-to = %q; only the first chunk replies", i, c.reply)
		}
		joined += strings.Trim(c.text, "<>") + " "
	}
	if strings.Join(strings.Fields(joined), " ") != strings.TrimSpace(long) {
		t.Errorf("text lost: %q", joined)
	}
}

func TestStreamingThrottlesCoalescesAndFinalReplaces(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.send(2,
		bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "Hel"},
	)
	if got := h.ch.ops("send"); len(got) != 1 || got[0].text != "Hel" || !got[0].plain {
		t.Fatalf("first draft: sends = %+v, want one plain send of the draft", got)
	}
	// Three more drafts within the same second: no edit yet.
	h.send(5,
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "Hello"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "Hello **wor"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "Hello **world"},
	)
	if got := h.ch.ops("edit"); len(got) != 0 {
		t.Fatalf("edits before the interval passed: %+v", got)
	}
	h.advance(999 * time.Millisecond)
	if got := h.ch.ops("edit"); len(got) != 0 {
		t.Fatalf("edit after 999ms: %+v", got)
	}
	h.advance(time.Millisecond)
	edits := h.ch.ops("edit")
	if len(edits) != 1 || edits[0].text != "Hello **world" {
		t.Fatalf("after 1s: edits = %+v, want one edit with the newest draft", edits)
	}
	// A tool hint appears under the draft at the next allowed edit.
	h.send(6, bus.OutboundMessage{Kind: bus.KindStatus, TurnID: "t", Content: "reading notes.md"})
	h.advance(time.Second)
	if got := h.ch.visible(); joinVisible(got) != "Hello **world\n\n… reading notes.md" {
		t.Fatalf("visible = %q, want the draft with the hint", got)
	}
	h.send(7, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "Hello **world**!"})
	if got := h.ch.visible(); joinVisible(got) != "<Hello **world**!>" {
		t.Fatalf("visible after final = %q, want the rendered final in the draft message", got)
	}
	if n := len(h.ch.ops("send")); n != 1 {
		t.Fatalf("%d sends, want 1: the final must replace the draft", n)
	}
	// Edits never came closer than the interval.
	edits = h.ch.ops("edit")
	for i := 1; i < len(edits)-1; i++ {
		if d := edits[i].at.Sub(edits[i-1].at); d < time.Second {
			t.Errorf("draft edits %d and %d only %s apart", i-1, i, d)
		}
	}
	// Typing stopped with the final: advancing far produces no more typing.
	n := len(h.ch.ops("typing"))
	h.advance(30 * time.Second)
	if m := len(h.ch.ops("typing")); m != n {
		t.Fatalf("typing continued after the final: %d → %d", n, m)
	}
}

func TestTypingRefreshedAndCapped(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{TypingCap: 20 * time.Second})
	h.send(1, bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"})
	for range 10 {
		h.advance(4 * time.Second)
	}
	got := len(h.ch.ops("typing"))
	// At 0, 4, 8, 12, 16 s; the cap at 20 s stops it and forgets the turn.
	if got != 5 {
		t.Fatalf("typing calls = %d, want 5 (every 4s until the 20s cap)", got)
	}
}

// With a typing delay, a turn that answers within it shows no indicator at
// all; a longer one shows it when the delay is over, then as usual.
func TestTypingWaitsForTheDelay(t *testing.T) {
	delayed := streaming
	delayed.TypingDelay = 500 * time.Millisecond
	tests := []struct {
		name   string
		answer time.Duration // when the final arrives
		want   int           // typing calls by then
	}{
		{"answered within the delay", 499 * time.Millisecond, 0},
		{"answered at the delay", 500 * time.Millisecond, 1},
		{"a long turn", 9 * time.Second, 3}, // at 0.5, 4.5 and 8.5 s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, delayed, ManagerConfig{})
			h.send(1, bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"})
			if n := len(h.ch.ops("typing")); n != 0 {
				t.Fatalf("%d typing calls at the turn's start, want none before the delay", n)
			}
			for left := tt.answer; left > 0; left -= min(left, 250*time.Millisecond) {
				h.advance(min(left, 250*time.Millisecond))
			}
			if n := len(h.ch.ops("typing")); n != tt.want {
				t.Fatalf("%d typing calls after %v, want %d", n, tt.answer, tt.want)
			}
			h.send(2, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "done"})
			h.advance(30 * time.Second)
			if n := len(h.ch.ops("typing")); n != tt.want {
				t.Fatalf("typing after the final: %d calls, want %d", n, tt.want)
			}
			if got := h.ch.visible(); joinVisible(got) != "<done>" {
				t.Fatalf("visible = %q", got)
			}
		})
	}
}

func TestLongFinalReplacesDraftAndSendsTheRest(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.send(2,
		bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "partial"},
	)
	final := strings.Repeat("abc ", 25)
	h.send(3, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: final})
	vis := h.ch.visible()
	if len(vis) != 3 || !strings.HasPrefix(vis[0], "<abc") {
		t.Fatalf("visible = %q, want three rendered chunks, the first in the draft message", vis)
	}
	if sends := h.ch.ops("send"); len(sends) != 3 {
		t.Fatalf("sends = %d, want 3 (draft + 2 new chunks)", len(sends))
	}
}

// An empty final (the message tool's text was the answer, and the model
// only repeated it) removes the draft that repeated it. Before drafts on
// screen were kept
// (docs/reliability.md#every-turn-ends-with-something-to-read), this test
// streamed the draft before the tool's message; a draft on screen before a
// mid-turn message now stays (TestMessageMidTurnSettlesTheDraft).
func TestEmptyFinalDeletesDraft(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.send(3,
		bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
		bus.OutboundMessage{Kind: bus.KindMessage, TurnID: "t", Content: "the answer via the message tool"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "the answer via the message tool"},
	)
	h.send(4, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t"})
	if got := h.ch.visible(); joinVisible(got) != "<the answer via the message tool>" {
		t.Fatalf("visible = %q, want only the tool's message", got)
	}
	if len(h.ch.ops("delete")) != 1 {
		t.Fatalf("draft not deleted: %+v", h.ch.ops(""))
	}
}

// TestMessageMidTurnSettlesTheDraft: a message sent in the middle of a turn
// (a message-tool note) leaves the draft on screen above it without its
// tool hint, and the turn's answer comes below it, never edited into a
// message above the note and never deleted
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestMessageMidTurnSettlesTheDraft(t *testing.T) {
	start := bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"}
	draft := func(s string) bus.OutboundMessage {
		return bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: s}
	}
	status := func(s string) bus.OutboundMessage {
		return bus.OutboundMessage{Kind: bus.KindStatus, TurnID: "t", Content: s}
	}
	note := bus.OutboundMessage{Kind: bus.KindMessage, TurnID: "t", Content: "working on it"}
	final := func(s string) bus.OutboundMessage {
		return bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: s}
	}
	tests := []struct {
		name    string
		steps   [][]bus.OutboundMessage // each step is sent, then the clock moves past the edit interval
		want    string
		deletes int
	}{
		{"text before the note stays, the answer comes below",
			[][]bus.OutboundMessage{{start, draft("Let me look.")}, {status("🔧 message")}, {note}, {draft("The answer")}, {final("The answer is 42.")}},
			"Let me look.|<working on it>|<The answer is 42.>", 0},
		{"a draft that goes on after the note shows only what is new",
			[][]bus.OutboundMessage{{start, draft("abc")}, {note}, {draft("abc def")}, {final("abc def ghi")}},
			"abc|<working on it>|<def ghi>", 0},
		{"two notes while one call goes on",
			[][]bus.OutboundMessage{{start, draft("abc")}, {note}, {draft("abc def")}, {note}, {draft("abc def ghi")}, {final("abc def ghi jkl")}},
			"abc|<working on it>|def|<working on it>|<ghi jkl>", 0},
		{"a final that only repeats the settled text adds nothing",
			[][]bus.OutboundMessage{{start, draft("All done.")}, {note}, {final("All done.")}},
			"All done.|<working on it>", 0},
		{"a draft that was only a tool hint goes, the answer comes below",
			[][]bus.OutboundMessage{{start, status("🔧 message")}, {note}, {final("Here.")}},
			"<working on it>|<Here.>", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, streaming, ManagerConfig{})
			n := 0
			for _, step := range tt.steps {
				n += len(step)
				h.send(n, step...)
				h.advance(time.Second)
			}
			if got := joinVisible(h.ch.visible()); got != tt.want {
				t.Errorf("visible = %q, want %q", got, tt.want)
			}
			if got := len(h.ch.ops("delete")); got != tt.deletes {
				t.Errorf("%d deletes, want %d: %+v", got, tt.deletes, h.ch.ops(""))
			}
		})
	}
}

func TestBadMarkupResendsThatChunkPlain(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	h.ch.setFail(func(c call) error {
		if c.op == "send" && !c.plain && strings.Contains(c.text, "bad") {
			return fmt.Errorf("can't parse entities: %w", ErrBadMarkup)
		}
		return nil
	})
	h.send(1, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "good chunk number one here\n\nbad chunk number two here\n\ngood chunk number three"})
	if got := h.ch.visible(); joinVisible(got) != "<good chunk number one here>|bad chunk number two here|<good chunk number three>" {
		t.Fatalf("visible = %q", got)
	}
}

func TestRateLimitedSendWaitsAndSendsOnce(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	limited := 2
	h.ch.setFail(func(c call) error {
		if c.op == "send" && limited > 0 {
			limited--
			return &RateLimitError{RetryAfter: 3 * time.Second, Err: errors.New("429")}
		}
		return nil
	})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "hello"}
	for i := 1; i <= 2; i++ {
		h.ch.waitCalls(t, "send!", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.clock.WaitForTimers(ctx, 1)
		cancel()
		if d, _ := h.clock.NextDeadline(); d != 3*time.Second {
			t.Fatalf("retry wait = %s, want retry_after 3s", d)
		}
		h.clock.Advance(3 * time.Second)
	}
	h.waitIdle("c1", 1)
	if got := h.ch.visible(); joinVisible(got) != "<hello>" {
		t.Fatalf("visible = %q, want the message exactly once", got)
	}
}

func TestRetryGivesUpWhenBoundReached(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{Retry: RetryPolicy{MaxAttempts: 10, MaxWait: 5 * time.Second}})
	h.ch.setFail(func(c call) error {
		return &RateLimitError{RetryAfter: 4 * time.Second, Err: errors.New("429")}
	})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "hello"}
	h.ch.waitCalls(t, "send!", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.clock.WaitForTimers(ctx, 1)
	h.clock.Advance(4 * time.Second)
	h.waitIdle("c1", 1)
	// 4s waited; another 4s would pass MaxWait 5s, so it stops at 2 tries.
	if n := len(h.ch.ops("send!")); n != 2 {
		t.Fatalf("tries = %d, want 2", n)
	}
}

// A storm of 429s longer than MaxAttempts still delivers the message once:
// each 429 says the call was not made, so only the total wait is bounded.
func TestRateLimitStormLongerThanMaxAttemptsDeliversOnce(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{Retry: RetryPolicy{MaxAttempts: 3, MaxWait: time.Minute}})
	storm := 6
	h.ch.setFail(func(c call) error {
		if c.op == "send" && storm > 0 {
			storm--
			return &RateLimitError{RetryAfter: time.Second, Err: errors.New("429")}
		}
		return nil
	})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "hello"}
	for i := 1; i <= 6; i++ {
		h.ch.waitCalls(t, "send!", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.clock.WaitForTimers(ctx, 1)
		cancel()
		h.clock.Advance(time.Second)
	}
	h.waitIdle("c1", 1)
	if got := h.ch.visible(); joinVisible(got) != "<hello>" {
		t.Fatalf("visible = %q, want the message exactly once after the storm", got)
	}
}

// When the final cannot be edited into the draft, it is sent anew and the
// stale draft removed: the user sees the answer once, not next to half of it.
func TestFailedFinalEditRemovesTheStaleDraft(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.send(2,
		bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "half an ans"},
	)
	h.ch.setFail(func(c call) error {
		if c.op == "edit" {
			return &PermanentError{Err: errors.New("message can't be edited")}
		}
		return nil
	})
	h.send(3, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "the whole answer"})
	if got := h.ch.visible(); joinVisible(got) != "<the whole answer>" {
		t.Fatalf("visible = %q, want only the final", got)
	}
	if len(h.ch.ops("delete")) != 1 {
		t.Fatalf("stale draft not deleted: %+v", h.ch.ops(""))
	}
}

func TestUnknownOutcomeAndPermanentAreNotRepeated(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"unknown outcome", &UnknownOutcomeError{Err: errors.New("timeout after write")}},
		{"permanent", &PermanentError{Err: errors.New("forbidden: bot was blocked")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
			h.ch.setFail(func(c call) error { return tc.err })
			h.send(1, bus.OutboundMessage{Kind: bus.KindFinal, Content: "hello"})
			if n := len(h.ch.ops("")); n != 1 {
				t.Fatalf("calls = %+v, want exactly one try", h.ch.ops(""))
			}
		})
	}
}

func TestTransientErrorsRetriedWithBackoff(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{Retry: RetryPolicy{MaxAttempts: 3, BaseBackoff: time.Second, MaxBackoff: 4 * time.Second}})
	fails := 2
	h.ch.setFail(func(c call) error {
		if fails > 0 {
			fails--
			return errors.New("connection refused")
		}
		return nil
	})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "hello"}
	for i := 1; i <= 2; i++ {
		h.ch.waitCalls(t, "send!", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.clock.WaitForTimers(ctx, 1)
		cancel()
		d, _ := h.clock.NextDeadline()
		if lo, hi := time.Second<<(i-1)/2, time.Second<<(i-1); d < lo || d > hi {
			t.Fatalf("backoff %d = %s, want in [%s, %s]", i, d, lo, hi)
		}
		h.clock.Advance(d)
	}
	h.waitIdle("c1", 1)
	if got := h.ch.visible(); joinVisible(got) != "<hello>" {
		t.Fatalf("visible = %q", got)
	}
}

func TestRateLimitedDraftPausesThenShowsNewest(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.send(1, bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "one"})
	h.ch.setFail(func(c call) error {
		if c.op == "edit" {
			return &RateLimitError{RetryAfter: 10 * time.Second, Err: errors.New("429")}
		}
		return nil
	})
	h.send(2, bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "one two"})
	h.advance(time.Second) // edit refused: paused for 10s
	if n := len(h.ch.ops("edit!")); n != 1 {
		t.Fatalf("refused edits = %d, want 1", n)
	}
	h.ch.setFail(nil)
	h.send(3, bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "one two three"})
	h.advance(5 * time.Second)
	if n := len(h.ch.ops("edit")); n != 0 {
		t.Fatalf("edited during the pause: %+v", h.ch.ops("edit"))
	}
	h.advance(5 * time.Second)
	if got := h.ch.visible(); joinVisible(got) != "one two three" {
		t.Fatalf("visible = %q, want the newest draft after the pause", got)
	}
	if n := len(h.ch.ops("edit")); n != 1 {
		t.Fatalf("edits after the pause = %d, want 1", n)
	}
}

func TestUnknownDraftSendStopsStreaming(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	h.ch.setFail(func(c call) error {
		if c.op == "send" && c.plain {
			return &UnknownOutcomeError{Err: errors.New("timeout")}
		}
		return nil
	})
	h.send(1, bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "dra"})
	h.send(2, bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "draft"})
	h.advance(time.Second)
	h.send(3, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "final"})
	if got := texts(h.ch.ops("send")); strings.Join(got, "|") != "<final>" {
		t.Fatalf("sends = %q, want only the final as a new message", got)
	}
	if n := len(h.ch.ops("send!")); n != 1 {
		t.Fatalf("draft sends = %d, want 1 (never repeated)", n)
	}
}

func TestChatsRunInParallelAndInOrder(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	release := make(chan struct{})
	h.ch.setFail(func(c call) error {
		if c.chat == "slow" {
			<-release
		}
		return nil
	})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "slow", Kind: bus.KindMessage, Content: "s1"}
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "slow", Kind: bus.KindMessage, Content: "s2"}
	for i := range 5 {
		h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindMessage, Content: fmt.Sprint("m", i)}
	}
	h.waitIdle("c1", 5)
	if got := texts(h.ch.ops("send")); strings.Join(got, ",") != "<m0>,<m1>,<m2>,<m3>,<m4>" {
		t.Fatalf("fast chat sends = %q (in order, not blocked by the slow chat)", got)
	}
	close(release)
	h.waitIdle("slow", 2)
	var slow []string
	for _, c := range h.ch.ops("send") {
		if c.chat == "slow" {
			slow = append(slow, c.text)
		}
	}
	if strings.Join(slow, ",") != "<s1>,<s2>" {
		t.Fatalf("slow chat sends = %q", slow)
	}
}

func TestIdleWorkersReaped(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{IdleTimeout: time.Minute})
	h.send(1, bus.OutboundMessage{Kind: bus.KindMessage, Content: "hi"})
	if n := h.m.Workers(); n != 1 {
		t.Fatalf("workers = %d, want 1", n)
	}
	h.clock.Advance(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for h.m.Workers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle worker not reaped")
		}
		time.Sleep(time.Millisecond) // polling an async condition, not timing
	}
	// A new message starts a fresh worker, counting from zero.
	h.mu.Lock()
	h.handled["c1"] = 0
	h.mu.Unlock()
	h.send(1, bus.OutboundMessage{Kind: bus.KindMessage, Content: "again"})
	if got := h.ch.visible(); joinVisible(got) != "<hi>|<again>" {
		t.Fatalf("visible = %q", got)
	}
}

// Past MaxChats a new chat is parked, never blocking the dispatcher, and
// the idle worker retires at once to make room: b is answered without the
// idle timeout passing (the old dispatcher waited for it, holding up every
// chat). The number of running workers never exceeds the cap.
func TestMaxChatsBoundsWorkers(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{MaxChats: 1, IdleTimeout: time.Minute})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "a", Kind: bus.KindMessage, Content: "a"}
	h.waitIdle("a", 1)
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "b", Kind: bus.KindMessage, Content: "b"}
	h.waitIdle("b", 1)
	if n := h.m.Workers(); n > 1 {
		t.Fatalf("workers = %d, want at most 1", n)
	}
	if got := h.ch.visible(); joinVisible(got) != "<a>|<b>" {
		t.Fatalf("visible = %q", got)
	}
}

// A chat whose worker is busy (its turn still running) keeps its place; a
// new chat past the cap waits parked for it, and the dispatcher meanwhile
// still serves the running chat.
func TestParkedChatWaitsForABusyWorkerWithoutBlockingOthers(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{MaxChats: 1, IdleTimeout: time.Minute})
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "a", Kind: bus.KindStart, TurnID: "ta"}
	h.waitIdle("a", 1)
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "b", Kind: bus.KindMessage, Content: "b"}
	eventually(t, "b parked while a's turn runs", func() bool { return h.m.Parked() == 1 })
	// a's final still gets through the dispatcher, then a retires for b.
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "a", Kind: bus.KindFinal, TurnID: "ta", Content: "a"}
	h.waitIdle("b", 1)
	if got := texts(h.ch.ops("send")); strings.Join(got, ",") != "<a>,<b>" {
		t.Fatalf("sends = %q", got)
	}
}

func TestShutdownDrainsQueuedMessages(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	release := make(chan struct{})
	h.ch.setFail(func(c call) error {
		if c.text == "<first>" {
			<-release
		}
		return nil
	})
	src := h.src
	src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindStart, TurnID: "t"}
	src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, TurnID: "t", Content: "first"}
	src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "second"}
	close(src) // the bus closed outbound: drain and stop
	close(release)
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the source closed")
	}
	if got := h.ch.visible(); joinVisible(got) != "<first>|<second>" {
		t.Fatalf("visible = %q, want everything queued delivered", got)
	}
}

func TestShutdownOnContextGivesUpAfterDrainTimeout(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{DrainTimeout: 3 * time.Second})
	h.ch.setFail(func(c call) error { return errors.New("network down") })
	var delivered atomic.Int32
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindFinal, Content: "x", Delivered: func() { delivered.Add(1) }}
	h.ch.waitCalls(t, "send!", 1)
	defer func() {
		// Cut short by shutdown: not reported, so the question is asked again.
		if n := delivered.Load(); n != 0 {
			t.Errorf("Delivered called %d times for a message shutdown kept from going out", n)
		}
	}()
	h.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.clock.WaitForTimers(ctx, 2) // the retry backoff and the drain timer
	h.clock.Advance(3 * time.Second)
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the drain timeout")
	}
}

// Delivered is called once per message, after the platform took it or
// refused it for good, so the agent can acknowledge the question then.
func TestDeliveredReportedAfterTheCall(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	var got []string
	report := func(name string) func() {
		return func() { got = append(got, fmt.Sprintf("%s after %d calls", name, len(h.ch.ops("")))) }
	}
	h.send(1, bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t", Delivered: report("start")})
	h.send(2, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "answer", Delivered: report("final")})
	h.ch.setFail(func(c call) error { return &PermanentError{Err: errors.New("bot was blocked")} })
	h.send(3, bus.OutboundMessage{Kind: bus.KindMessage, Content: "refused", Delivered: report("refused")})
	if strings.Join(got, "; ") != "final after 2 calls; refused after 3 calls" {
		t.Fatalf("Delivered calls: %q", got)
	}
}

func TestUnknownChannelAndEditorlessChannel(t *testing.T) {
	h := newHarness(t, streaming, ManagerConfig{})
	dropped := make(chan struct{})
	h.src <- bus.OutboundMessage{Channel: "nope", ChatID: "c1", Kind: bus.KindFinal, Content: "lost", Delivered: func() { close(dropped) }}
	h.send(1, bus.OutboundMessage{Kind: bus.KindFinal, Content: "ok"})
	if got := h.ch.visible(); joinVisible(got) != "<ok>" {
		t.Fatalf("visible = %q", got)
	}
	select {
	case <-dropped: // nothing will ever deliver it: the question is not held open
	case <-time.After(5 * time.Second):
		t.Fatal("Delivered not called for a message to an unknown channel")
	}
	if err := h.m.Register(h.ch, testRenderer{40}, streaming); err == nil {
		t.Fatal("registering a name twice succeeded")
	}
}

func TestMediaSentOnePartPerCallSoRetriesNeverRepeat(t *testing.T) {
	h := newHarness(t, config.OutputConfig{}, ManagerConfig{})
	limited := true
	h.ch.setFail(func(c call) error {
		if c.media == 1 && c.text == "" && limited && len(h.ch.ops("send")) == 1 {
			limited = false
			return &RateLimitError{RetryAfter: time.Second, Err: errors.New("429")}
		}
		return nil
	})
	img := llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: []byte("x")}}
	h.src <- bus.OutboundMessage{Channel: "fake", ChatID: "c1", Kind: bus.KindMessage, Media: []llm.Part{img, img, img}}
	h.ch.waitCalls(t, "send!", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.clock.WaitForTimers(ctx, 1)
	h.clock.Advance(time.Second)
	h.waitIdle("c1", 1)
	if n := len(h.ch.ops("send")); n != 3 {
		t.Fatalf("%d attachments delivered, want each of the 3 exactly once", n)
	}
}

func TestMailboxCoalescesDrafts(t *testing.T) {
	b := newMailbox()
	b.push(bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"})
	b.push(bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "a"})
	b.push(bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "u", Content: "other turn"})
	b.push(bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "ab"})
	b.push(bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "abc"})
	b.push(bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "next turn reusing the id"})
	var got []string
	for {
		m, ok := b.pop()
		if !ok {
			break
		}
		got = append(got, m.Kind.String()+":"+m.Content)
	}
	want := "start:|draft:ab|draft:other turn|final:abc|draft:next turn reusing the id"
	if strings.Join(got, "|") != want {
		t.Fatalf("mailbox = %q\nwant %q", strings.Join(got, "|"), want)
	}
}

// drafts is a DraftRecord kept in memory, as NATS KV keeps it across a
// channels process's restart.
type drafts struct {
	mu sync.Mutex
	m  map[string][]Sent
}

func (d *drafts) Remember(_ context.Context, channel, turn string, refs []Sent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string][]Sent{}
	}
	d.m[channel+"/"+turn] = slices.Clone(refs)
	return nil
}

func (d *drafts) Recall(_ context.Context, channel, turn string) ([]Sent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.m[channel+"/"+turn]), nil
}

// A manager that stops (a channels process killed) after a turn's draft
// went out, and the one that takes over: the turn's later drafts and its
// final, and the same final once more (delivered again after a crash
// before its acknowledgement), are edited into the draft on screen; the
// chat shows the answer once. Without a record the answer would be sent
// again beside the draft.
func TestRestartedManagerEditsTheAnswerIntoTheDraftShownBefore(t *testing.T) {
	tests := []struct {
		name  string
		after []bus.OutboundMessage // what the new manager gets of the turn
	}{
		{"final only", []bus.OutboundMessage{{Kind: bus.KindFinal, TurnID: "t", Content: "the whole answer"}}},
		{"drafts then final", []bus.OutboundMessage{
			{Kind: bus.KindDraft, TurnID: "t", Content: "the whole"},
			{Kind: bus.KindFinal, TurnID: "t", Content: "the whole answer"},
		}},
		{"final delivered again", []bus.OutboundMessage{
			{Kind: bus.KindFinal, TurnID: "t", Content: "the whole answer"},
			{Kind: bus.KindFinal, TurnID: "t", Content: "the whole answer"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &drafts{}
			first := newHarness(t, streaming, ManagerConfig{Drafts: rec})
			first.send(2,
				bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
				bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "the"},
			)
			first.stop()
			if got := joinVisible(first.ch.visible()); got != "the" {
				t.Fatalf("before the restart the chat shows %q, want the draft", got)
			}
			second := newHarnessOn(t, streaming, ManagerConfig{Drafts: rec}, first.ch)
			second.send(len(tt.after), tt.after...)
			if got := joinVisible(second.ch.visible()); got != "<the whole answer>" {
				t.Errorf("after the restart the chat shows %q, want the answer once, in the draft's message", got)
			}
			if n := len(second.ch.ops("send")); n != 1 {
				t.Errorf("%d sends in all, want 1 (the draft)", n)
			}
		})
	}
}
