package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// saveMemory is a model answer calling save_memory with these arguments.
func saveMemory(entry, mem string) fakellm.Reply {
	args, _ := json.Marshal(map[string]string{"history_entry": entry, "memory_update": mem})
	return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "save", Name: memory.ToolName, Args: string(args)}}}
}

func isMemoryCall(r fakellm.Request) bool { return r.ToolChoice == memory.ToolName }

// memoryCalls counts the forced save_memory requests so far.
func (h *harness) memoryCalls() int {
	n := 0
	for _, r := range h.script.Requests() {
		if isMemoryCall(r) {
			n++
		}
	}
	return n
}

// turn sends content in chat and waits for the turn's final message.
func (h *harness) turn(chat, content string) bus.OutboundMessage {
	h.t.Helper()
	n := len(h.messagesOfKind(chat, bus.KindFinal))
	h.send(chat, content)
	return h.waitFinals(chat, n+1)[n]
}

// until polls cond (state outside the outbound stream) with waitFor's deadline.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	h.waitFor(what, func([]bus.OutboundMessage) bool { return cond() })
}

func (h *harness) snapshot(key string) session.Snapshot {
	h.t.Helper()
	snap, err := h.store.Get(key)
	if err != nil {
		h.t.Fatal(err)
	}
	return snap
}

func (h *harness) readFile(rel string) string {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.ws, rel))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return string(data)
}

// idle reports whether no consolidation of key is running and it has
// failed exactly failures times in a row.
func (h *harness) memoryIdle(key string, failures int) bool {
	running, n, _, _ := h.agent.mem.status(key)
	return !running && n == failures
}

// smallWindow makes consolidation start after 10 messages and retry at once.
func smallWindow(c *Config) {
	c.MemoryWindow = 10
	c.MemoryRetry = time.Nanosecond
}

var datedParagraph = regexp.MustCompile(`(?m)^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] `)

func TestConsolidationPastMemoryWindow(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, smallWindow)
	h.writeFile(memory.MemoryFile, "# Memory\n\n- The user is called Ada.\n")
	h.writeFile(memory.HistoryFile, "# History\n")
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if isMemoryCall(r) {
			return saveMemory("Ada said she drinks tea, not coffee.", "# Memory\n\n- The user is called Ada.\n- Ada drinks tea.\n")
		}
		return fakellm.Reply{Text: "noted: " + r.LastUserText()}
	}
	for i := range 6 {
		h.turn("c1", fmt.Sprintf("m%d", i))
	}
	h.until("consolidation", func() bool { return h.snapshot("test:c1").Consolidated > 0 })

	snap := h.snapshot("test:c1")
	if snap.Consolidated != 6 || len(snap.Messages) != 12 {
		t.Fatalf("offset %d of %d messages; want the older half (6 of 12) consolidated at a user turn", snap.Consolidated, len(snap.Messages))
	}
	var req fakellm.Request
	for _, r := range h.script.Requests() {
		if isMemoryCall(r) {
			req = r
		}
	}
	prompt := req.LastUserText()
	if len(req.Tools) != 1 || req.Tools[0] != memory.ToolName || !strings.Contains(prompt, "- The user is called Ada.") {
		t.Errorf("the memory call must force save_memory and show the current MEMORY.md; tools %v, prompt:\n%s", req.Tools, prompt)
	}
	if !strings.Contains(prompt, "m2") || strings.Contains(prompt, "m3") {
		t.Errorf("the memory call should see the older half (m0-m2) only:\n%s", prompt)
	}
	if got := h.readFile(memory.MemoryFile); got != "# Memory\n\n- The user is called Ada.\n- Ada drinks tea.\n" {
		t.Errorf("MEMORY.md = %q", got)
	}
	hist := h.readFile(memory.HistoryFile)
	if !strings.HasPrefix(hist, "# History\n\n[") || !datedParagraph.MatchString(hist) || !strings.HasSuffix(hist, "Ada said she drinks tea, not coffee.\n") {
		t.Errorf("HISTORY.md should gain one dated paragraph after its header:\n%s", hist)
	}

	// The next turn sees the new memory and only the newest half of the session.
	h.script.Push(fakellm.Reply{Text: "tea it is"}) // queued replies come before Func
	h.turn("c1", "what do I drink?")
	reqs := h.script.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.System, "# Memory") || !strings.Contains(last.System, "- Ada drinks tea.") {
		t.Errorf("the next system prompt lacks the new memory:\n%s", last.System)
	}
	if len(last.Messages) != 7 || !strings.Contains(last.Messages[0].Text, "m3") {
		t.Errorf("the next turn should continue from m3 (the kept half): %d messages, first %q", len(last.Messages), last.Messages[0].Text)
	}

	status := ""
	h.send("c1", "/status")
	h.waitFor("status", func(out []bus.OutboundMessage) bool {
		for _, m := range out {
			if m.Kind == bus.KindMessage && strings.HasPrefix(m.Content, "Model:") {
				status = m.Content
				return true
			}
		}
		return false
	})
	if !strings.Contains(status, "14 messages (6 consolidated into memory, 8 not yet)") {
		t.Errorf("/status = %q", status)
	}
}

func TestConsolidationFailuresRetryThenDump(t *testing.T) {
	tests := []struct {
		name  string
		reply fakellm.Reply
	}{
		{"model never calls save_memory", fakellm.Reply{Text: "I would rather keep chatting."}},
		{"arguments are not JSON", fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "s", Name: memory.ToolName, Args: `{"history_entry": "x`}}}},
		{"arguments have the wrong types", fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "s", Name: memory.ToolName, Args: `{"history_entry": 5, "memory_update": ["a"]}`}}}},
		{"memory_update would wipe the memory", saveMemory("[2025-01-01 10:00] Talked.", "")},
		{"provider error", fakellm.Reply{Status: 500, ErrorMessage: "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, smallWindow)
			const mem = "# Memory\n\n- keep me\n"
			h.writeFile(memory.MemoryFile, mem)
			h.script.Func = func(r fakellm.Request) fakellm.Reply {
				if isMemoryCall(r) {
					return tt.reply
				}
				return fakellm.Reply{Text: "ok"}
			}
			for i := range 6 {
				h.turn("c1", fmt.Sprintf("m%d", i))
			}
			for failures := 1; failures <= 2; failures++ {
				h.until(fmt.Sprintf("failure %d", failures), func() bool { return h.memoryIdle("test:c1", failures) })
				if calls := h.memoryCalls(); calls != failures {
					t.Fatalf("%d memory calls after %d failures", calls, failures)
				}
				if snap := h.snapshot("test:c1"); snap.Consolidated != 0 {
					t.Fatalf("a failed consolidation moved the offset to %d", snap.Consolidated)
				}
				if h.readFile(memory.MemoryFile) != mem || h.readFile(memory.HistoryFile) != "" {
					t.Fatalf("a failed consolidation wrote the memory files")
				}
				h.turn("c1", fmt.Sprintf("retry %d", failures)) // the next turn retries
			}
			h.until("raw dump", func() bool { return h.snapshot("test:c1").Consolidated > 0 })
			if !h.memoryIdle("test:c1", 0) {
				h.until("failures reset", func() bool { return h.memoryIdle("test:c1", 0) })
			}
			snap := h.snapshot("test:c1")
			hist := h.readFile(memory.HistoryFile)
			if !datedParagraph.MatchString(hist) || !strings.Contains(hist, "saved as a transcript") ||
				!strings.Contains(hist, "m0") || !strings.Contains(hist, "test:c1") || strings.Contains(hist, `"parts"`) {
				t.Errorf("HISTORY.md should hold a dated, readable transcript:\n%s", hist)
			}
			for i := range 4 { // the dumped part: the older half of 16 messages, m0-m3
				if !strings.Contains(hist, fmt.Sprintf("\n  m%d", i)) {
					t.Errorf("m%d missing from the dump", i)
				}
			}
			if h.readFile(memory.MemoryFile) != mem {
				t.Errorf("a raw dump must not touch MEMORY.md")
			}
			if snap.Consolidated != 8 || snap.Messages[snap.Consolidated].Role != "user" {
				t.Errorf("offset after the dump = %d of %d", snap.Consolidated, len(snap.Messages))
			}
		})
	}
}

func TestConsolidationsOfOneSessionNeverOverlap(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, smallWindow)
	gate := make(chan struct{})
	var gateOnce sync.Once
	open := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var inFlight, peak, calls atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if !isMemoryCall(r) {
			return fakellm.Reply{Text: "ok"}
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if calls.Add(1) == 1 {
			<-gate
		}
		return saveMemory(fmt.Sprintf("[2025-01-01 10:00] Part %d.", calls.Load()), "# Memory\n")
	}
	for i := range 6 {
		h.turn("c1", fmt.Sprintf("m%d", i))
	}
	h.until("first consolidation blocked in the model", func() bool { return calls.Load() == 1 })
	// Turns go on while it is blocked, and each would trigger another one.
	for i := range 3 {
		if f := h.turn("c1", fmt.Sprintf("during %d", i)); f.Content != "ok" {
			t.Fatalf("reply blocked or failed while consolidating: %+v", f)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d consolidations of one session started at once", n)
	}
	// /new waits for the running consolidation instead of starting a second.
	h.send("c1", "/new")
	h.waitFor("saving notice", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Saving this conversation") })
	open()
	h.waitFor("/new done", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Started a new conversation") })
	if p := peak.Load(); p != 1 {
		t.Errorf("peak concurrent consolidations of one session = %d, want 1", p)
	}
	// The background one, possibly followed by another for the turns that
	// came meanwhile (a backlog is folded in until the session is under its
	// window), then /new's for the rest: one after the other.
	n := int(calls.Load())
	if n < 2 {
		t.Errorf("%d consolidations, want the background one and /new's", n)
	}
	hist := h.readFile(memory.HistoryFile)
	if strings.Count(hist, "[2025-01-01 10:00]") != n {
		t.Errorf("HISTORY.md should hold all %d parts:\n%s", n, hist)
	}
	for i := 1; i < n; i++ {
		if strings.Index(hist, fmt.Sprintf("Part %d.", i)) > strings.Index(hist, fmt.Sprintf("Part %d.", i+1)) {
			t.Errorf("HISTORY.md parts out of order:\n%s", hist)
		}
	}
}

// hasMessage reports whether a standalone message in chat contains text.
func hasMessage(out []bus.OutboundMessage, chat, text string) bool {
	for _, m := range out {
		// A command that took a while ends with a final (commandReply).
		if (m.Kind == bus.KindMessage || m.Kind == bus.KindFinal) && m.ChatID == chat && strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

// currentMemory extracts the MEMORY.md the memory prompt shows.
func currentMemory(t *testing.T, prompt string) string {
	_, after, ok := strings.Cut(prompt, "## Current MEMORY.md\n\n")
	mem, _, ok2 := strings.Cut(after, "\n## Conversation to fold in")
	if !ok || !ok2 {
		t.Errorf("memory prompt without the current MEMORY.md:\n%s", prompt)
	}
	return mem
}

func TestConcurrentSessionsDoNotLoseMemoryUpdates(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, smallWindow)
	h.writeFile(memory.MemoryFile, "# Memory\n")
	both := make(chan struct{})
	var arrived atomic.Int32
	var calls atomic.Int32
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if !isMemoryCall(r) {
			return fakellm.Reply{Text: "ok"}
		}
		calls.Add(1)
		prompt := r.LastUserText()
		mem := currentMemory(t, prompt)
		chat := "a"
		if strings.Contains(prompt, "Session test:b,") {
			chat = "b"
		}
		// The first two calls (one per session) wait for each other, so both
		// read the same MEMORY.md and the second commit conflicts.
		if n := arrived.Add(1); n == 2 {
			close(both)
		} else if n < 2 {
			<-both
		}
		return saveMemory("[2025-01-01 10:00] Chat "+chat+".", mem+"- fact from chat "+chat+"\n")
	}
	for i := range 6 {
		h.turn("a", fmt.Sprintf("a%d", i))
		h.turn("b", fmt.Sprintf("b%d", i))
	}
	h.until("both consolidated", func() bool {
		return h.snapshot("test:a").Consolidated > 0 && h.snapshot("test:b").Consolidated > 0
	})
	mem := h.readFile(memory.MemoryFile)
	if !strings.Contains(mem, "- fact from chat a") || !strings.Contains(mem, "- fact from chat b") {
		t.Errorf("a concurrent update was lost:\n%s", mem)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d memory calls, want 3 (the conflicting one is redone on the merged memory)", n)
	}
	if hist := h.readFile(memory.HistoryFile); strings.Count(hist, "Chat a.") != 1 || strings.Count(hist, "Chat b.") != 1 {
		t.Errorf("each session should add exactly one history entry:\n%s", hist)
	}
}

func TestNewKeepsSessionWhenConsolidationFails(t *testing.T) {
	noLeaks(t)
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "hello"}, fakellm.Reply{Text: "sure"})
	h.turn("c1", "hi")
	h.turn("c1", "remember I like tea")

	h.script.Push(fakellm.Reply{Text: "no tool for me"}) // the forced call is not answered with save_memory
	h.send("c1", "/new")
	out := h.waitFor("/new refused", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "could not save") })
	if !hasMessage(out, "c1", "Saving this conversation") {
		t.Error("the user was not told that the conversation is being saved")
	}
	for _, m := range out {
		if m.Kind == bus.KindMessage && strings.Contains(m.Content, "could not save") &&
			(!m.IsError || !strings.Contains(m.Content, "kept it") || !strings.Contains(m.Content, "did not answer in the form")) {
			t.Errorf("failure reply should say why and that the session is kept: %+v", m)
		}
	}
	if snap := h.snapshot("test:c1"); len(snap.Messages) != 4 || snap.Consolidated != 0 {
		t.Fatalf("session after failed /new: %d messages, offset %d", len(snap.Messages), snap.Consolidated)
	}
	if archives(t, h) != 0 {
		t.Fatal("the session was archived although it was not saved")
	}

	h.script.Push(saveMemory("[2025-01-01 10:00] Said hi; likes tea.", "# Memory\n\n- Likes tea.\n"))
	h.send("c1", "/new")
	h.waitFor("/new done", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Started a new conversation") })
	if snap := h.snapshot("test:c1"); len(snap.Messages) != 0 {
		t.Errorf("new session has %d messages", len(snap.Messages))
	}
	if archives(t, h) != 1 {
		t.Error("the old session file was not archived")
	}
	if !strings.Contains(h.readFile(memory.MemoryFile), "Likes tea.") || !strings.Contains(h.readFile(memory.HistoryFile), "likes tea.") {
		t.Error("/new did not save the conversation to memory")
	}
	reqs := h.script.Requests()
	if last := reqs[len(reqs)-1]; !isMemoryCall(last) || !strings.Contains(last.LastUserText(), "remember I like tea") {
		t.Error("/new should fold in every unconsolidated message, the newest turn too")
	}
}

// archives counts the archived session files.
func archives(t *testing.T, h *harness) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.ws, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".archive") {
			n++
		}
	}
	return n
}

func TestCutPoint(t *testing.T) {
	// roles: u=user a=assistant t=tool
	tests := []struct {
		roles string
		from  int
		want  int
	}{
		{"uauauaua", 0, 4},       // the middle is a user message
		{"uatauauaua", 0, 4},     // the last user message before the middle
		{"uatataua", 0, 6},       // none before the middle: the first one after
		{"uauauaua", 2, 4},       // from an earlier offset
		{"uatatata", 0, 0},       // one turn: nothing to cut
		{"uauauatatatata", 0, 4}, // the newest turn is kept even when it is long
	}
	roles := map[rune]llm.Role{'u': llm.RoleUser, 'a': llm.RoleAssistant, 't': llm.RoleTool}
	for _, tt := range tests {
		t.Run(tt.roles, func(t *testing.T) {
			var msgs []llm.Message
			for _, r := range tt.roles {
				msgs = append(msgs, llm.Message{Role: roles[r]})
			}
			if got := cutPoint(msgs, tt.from); got != tt.want {
				t.Errorf("cutPoint(%s, %d) = %d, want %d", tt.roles, tt.from, got, tt.want)
			}
		})
	}
}

func TestNewSavesATranscriptWhenConsolidationKeepsFailing(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MemoryMaxFailures = 2 })
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if isMemoryCall(r) {
			return fakellm.Reply{Status: 503, ErrorMessage: "overloaded"}
		}
		return fakellm.Reply{Text: "hello"}
	}
	h.turn("c1", "hi, my passport number ends in 42")
	h.send("c1", "/new")
	h.waitFor("first /new refused", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "could not save") })
	if archives(t, h) != 0 {
		t.Fatal("archived after one failure")
	}
	h.send("c1", "/new")
	out := h.waitFor("second /new", func(out []bus.OutboundMessage) bool { return hasMessage(out, "c1", "Started a new conversation") })
	if !hasMessage(out, "c1", "saved it as a transcript") {
		t.Error("the user should learn the conversation was saved as a transcript")
	}
	if archives(t, h) != 1 || len(h.snapshot("test:c1").Messages) != 0 {
		t.Error("the session should be archived once its messages are in HISTORY.md")
	}
	if hist := h.readFile(memory.HistoryFile); !strings.Contains(hist, "passport number ends in 42") || !strings.Contains(hist, "memory consolidation failed") {
		t.Errorf("HISTORY.md:\n%s", hist)
	}
}

func TestConsolidationByTokenShare(t *testing.T) {
	noLeaks(t)
	// 1% of gpt-4o-mini's 128k window is 1,280 tokens: two long messages
	// cross it long before the memory window of 100 messages.
	h := newHarness(t, func(c *Config) { c.MemoryShare = 0.01 })
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if isMemoryCall(r) {
			return saveMemory("[2025-01-01 10:00] Pasted two long documents.", "# Memory\n- Works on long documents.\n")
		}
		return fakellm.Reply{Text: "read it"}
	}
	long := strings.Repeat("lorem ipsum dolor sit amet ", 400)
	h.turn("c1", "first document: "+long)
	if n := h.memoryCalls(); n != 0 {
		t.Fatalf("a single turn cannot be cut, yet %d memory calls were made", n)
	}
	h.turn("c1", "second document: "+long)
	h.until("consolidation", func() bool { return h.snapshot("test:c1").Consolidated > 0 })
	if snap := h.snapshot("test:c1"); snap.Consolidated != 2 || len(snap.Messages) != 4 {
		t.Errorf("offset %d of %d, want the first turn (2 of 4) consolidated", snap.Consolidated, len(snap.Messages))
	}
}

// A long backlog (here 400 messages against a window of 10) is folded in
// part after part in the background after one turn, until the session is
// back under its window; no part is bigger than a third of the context
// window, so no transcript has to be cut.
func TestBacklogConvergesInTheBackground(t *testing.T) {
	noLeaks(t)
	h := newHarness(t, smallWindow)
	var seed []llm.Message
	for i := range 200 {
		seed = append(seed, llm.NewText(llm.RoleUser, fmt.Sprintf("old question %d %s", i, strings.Repeat("word ", 400))),
			llm.NewText(llm.RoleAssistant, fmt.Sprintf("old answer %d", i)))
	}
	if _, err := h.store.Append("test:c1", seed...); err != nil {
		t.Fatal(err)
	}
	var biggest atomic.Int64
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if !isMemoryCall(r) {
			return fakellm.Reply{Text: "ok"}
		}
		if n := int64(len(r.Raw)); n > biggest.Load() {
			biggest.Store(n)
		}
		return saveMemory("[2025-01-01 10:00] Older talk.", "# Memory\n")
	}
	h.turn("c1", "new question")
	h.until("backlog folded in", func() bool {
		snap := h.snapshot("test:c1")
		return len(snap.Unconsolidated()) <= 10 && h.memoryIdle("test:c1", 0)
	})
	if n := h.memoryCalls(); n < 3 {
		t.Errorf("%d consolidation calls for a 400-message backlog; want several bounded parts", n)
	}
	// The harness's model window is 128k tokens: a third of it is ~170 KB of text.
	if b := biggest.Load(); b > 250_000 {
		t.Errorf("a consolidation request carried %d bytes; parts should be bounded", b)
	}
}

func TestPartEnd(t *testing.T) {
	turn := func(words int) []llm.Message {
		return []llm.Message{llm.NewText(llm.RoleUser, strings.Repeat("w ", words)), llm.NewText(llm.RoleAssistant, "a")}
	}
	var msgs []llm.Message
	for _, w := range []int{100, 100, 100, 1000, 100} {
		msgs = append(msgs, turn(w)...)
	}
	cost := func(from, to int) int {
		n := 0
		for _, m := range msgs[from:to] {
			n += history.Estimate(m)
		}
		return n
	}
	tests := []struct {
		name              string
		from, end, budget int
		want              int
	}{
		{"everything fits", 0, 10, 1 << 20, 10},
		{"cut at the last boundary that fits", 0, 10, cost(0, 6), 6},
		{"a budget between boundaries rounds down", 0, 10, cost(0, 6) + 5, 6},
		{"a first turn bigger than the budget goes alone", 6, 10, 10, 8},
		{"from inside", 2, 8, cost(2, 6), 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partEnd(msgs, tt.from, tt.end, tt.budget); got != tt.want {
				t.Errorf("partEnd = %d, want %d", got, tt.want)
			}
		})
	}
}
