package memory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

// testFiles opens a fresh workspace holding files (path -> content).
func testFiles(t *testing.T, files map[string]string) (*Files, string) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := workspace.OpenFiles(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return NewFiles(root), dir
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestCommit(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		base, mem   string
		entry       string
		wantErr     error
		wantMemory  string
		wantHistory string
	}{
		{
			name:  "fresh workspace",
			files: map[string]string{}, base: "", mem: "# Memory\n- a\n", entry: "[2025-01-01 10:00] First.",
			wantMemory: "# Memory\n- a\n", wantHistory: "[2025-01-01 10:00] First.\n",
		},
		{
			name:  "history after a header without a trailing newline",
			files: map[string]string{HistoryFile: "# History"}, mem: "", entry: "[2025-01-01 10:00] Next.",
			wantMemory: "", wantHistory: "# History\n\n[2025-01-01 10:00] Next.\n",
		},
		{
			name:  "history after a blank line",
			files: map[string]string{HistoryFile: "# History\n\n"}, mem: "", entry: "  [2025-01-01 10:00] Next.\n\n",
			wantMemory: "", wantHistory: "# History\n\n[2025-01-01 10:00] Next.\n",
		},
		{
			name:  "memory changed underneath",
			files: map[string]string{MemoryFile: "# Memory\n- edited meanwhile\n"}, base: "# Memory\n", mem: "# Memory\n- b\n", entry: "x",
			wantErr: ErrConflict, wantMemory: "# Memory\n- edited meanwhile\n", wantHistory: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dir := testFiles(t, tt.files)
			err := f.Commit(tt.base, tt.mem, tt.entry)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Commit = %v, want %v", err, tt.wantErr)
			}
			if got := read(t, dir, MemoryFile); got != tt.wantMemory {
				t.Errorf("MEMORY.md = %q, want %q", got, tt.wantMemory)
			}
			if got := read(t, dir, HistoryFile); got != tt.wantHistory {
				t.Errorf("HISTORY.md = %q, want %q", got, tt.wantHistory)
			}
		})
	}
}

func TestCommitLeavesAnUnchangedMemoryFileAlone(t *testing.T) {
	f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
	p := filepath.Join(dir, MemoryFile)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit("# Memory\n", "# Memory\n", "[2025-01-01 10:00] Nothing new."); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("MEMORY.md was rewritten although unchanged (mtime %v, err %v): the prompt cache would go cold", fi.ModTime(), err)
	}
}

func TestMemoryFilesRefuseSymlinksOutOfTheWorkspace(t *testing.T) {
	f, dir := testFiles(t, map[string]string{})
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "memory"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, HistoryFile)); err != nil {
		t.Skip("symlinks unavailable:", err)
	}
	if err := f.AppendHistory("[2025-01-01 10:00] x"); err == nil {
		t.Error("appending through a symlink out of the workspace should fail")
	}
	if got := read(t, filepath.Dir(outside), "victim"); got != "precious\n" {
		t.Errorf("the file outside was changed: %q", got)
	}
}

func TestConcurrentCommitsSerialise(t *testing.T) {
	f, dir := testFiles(t, nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := f.AppendHistory("[2025-01-01 10:00] entry " + string(rune('a'+i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	hist := read(t, dir, HistoryFile)
	if n := strings.Count(hist, "[2025-01-01 10:00] entry "); n != 20 || strings.Count(hist, "\n\n") != 19 {
		t.Errorf("20 appends gave %d entries:\n%s", n, hist)
	}
}

// model answers every call with reply (or err) and records the requests.
type model struct {
	mu      sync.Mutex
	reply   func(req llm.Request) (llm.Message, error)
	reqs    []llm.Request
	callers []usage.Call
	window  int
	onCall  func()
	calls   int
}

func (m *model) Complete(ctx context.Context, _ string, req llm.Request, _ func(llm.Delta)) (llm.Message, error) {
	c, _ := usage.CallFrom(ctx)
	m.mu.Lock()
	m.callers = append(m.callers, c)
	m.reqs = append(m.reqs, req)
	m.calls++
	m.mu.Unlock()
	if m.onCall != nil {
		m.onCall()
	}
	return m.reply(req)
}

func (m *model) ContextWindow(string) int {
	if m.window == 0 {
		return 128000
	}
	return m.window
}

func call(args string) llm.Message {
	var raw json.RawMessage
	var perr string
	if json.Valid([]byte(args)) {
		raw = json.RawMessage(args)
	} else {
		perr = "unexpected end of JSON input"
	}
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
		Call: &llm.ToolCall{ID: "c", Name: ToolName, Arguments: raw, RawArgs: args, ParseError: perr}}}}
}

func saveArgs(entry, mem string) string {
	b, _ := json.Marshal(map[string]string{"history_entry": entry, "memory_update": mem})
	return string(b)
}

var t0 = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

// conversation is a short session with a tool call, in UTC.
func conversation() []llm.Message {
	res := llm.ToolResult{ToolCallID: "r1", Name: "read_file", Content: llm.PlainContent(strings.Repeat("line of the file\n", 200))}
	call := llm.ToolCall{ID: "r1", Name: "read_file", Arguments: json.RawMessage(`{"path":"trip.md"}`)}
	res.Content = history.Detail(call, res)
	return []llm.Message{
		{Role: llm.RoleUser, Time: t0, Parts: []llm.Part{llm.Text("[Fri 2025-03-14 09:30 UTC · telegram · chat 42 · from Ada]\nPlan the Lisbon trip.\n\nFlights on 2 May.")}},
		{Role: llm.RoleAssistant, Time: t0.Add(time.Minute), Parts: []llm.Part{llm.Text("Let me read your notes."), {Kind: llm.PartToolCall, Call: &call}}},
		{Role: llm.RoleTool, Time: t0.Add(time.Minute), Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &res}}},
		{Role: llm.RoleAssistant, Time: t0.Add(2 * time.Minute), Parts: []llm.Part{llm.Text("Booked: TAP, aisle seat.")}},
		{Role: llm.RoleUser, Time: t0.Add(3 * time.Minute), Parts: []llm.Part{llm.Text("thanks"), {Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: "inbox/ticket.png"}}}},
	}
}

func newTestConsolidator(t *testing.T, f *Files, m *model) *Consolidator {
	// MaxTokens as the daemon passes it: agents.max_tokens of config.
	return NewConsolidator(f, m, Config{MaxTokens: config.Defaults().Agents.MaxTokens, Location: time.UTC, Clock: clock.Func(func() time.Time { return t0.Add(time.Hour) })}, zaptest.NewLogger(t))
}

func TestConsolidateRequestAndApply(t *testing.T) {
	f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n\n## About the user\n- Name: Ada\n", HistoryFile: "# History\n"})
	m := &model{reply: func(llm.Request) (llm.Message, error) {
		return call(saveArgs("Planned the Lisbon trip:\n\nflights on 2 May with TAP.", "# Memory\n\n## About the user\n- Name: Ada\n- Prefers aisle seats\n\n")), nil
	}}
	c := newTestConsolidator(t, f, m)
	if err := c.Consolidate(context.Background(), "smart", "telegram:42", conversation()); err != nil {
		t.Fatal(err)
	}
	// The usage ledger counts the call as the session's consolidation.
	if c := m.callers[0]; c.Origin != usage.OriginConsolidation || c.Session != "telegram:42" || c.Chat != "telegram:42" {
		t.Errorf("call made for %+v", c)
	}
	req := m.reqs[0]
	if req.ForceTool != ToolName || len(req.Tools) != 1 || req.Tools[0].Name != ToolName || req.MaxTokens != 8192 {
		t.Errorf("request does not force save_memory: %+v", req)
	}
	goldenFile(t, "request.txt", req.System+"\n\n=== user ===\n"+req.Messages[0].Text())
	if got := read(t, dir, MemoryFile); got != "# Memory\n\n## About the user\n- Name: Ada\n- Prefers aisle seats\n" {
		t.Errorf("MEMORY.md = %q", got)
	}
	// The entry got the first message's time and became one paragraph.
	if got := read(t, dir, HistoryFile); got != "# History\n\n[2025-03-14 09:30] Planned the Lisbon trip:\nflights on 2 May with TAP.\n" {
		t.Errorf("HISTORY.md = %q", got)
	}
}

func TestConsolidateRejectsBadAnswers(t *testing.T) {
	const mem = "# Memory\n- keep\n"
	tests := []struct {
		name  string
		reply llm.Message
		err   error
		want  error
	}{
		{name: "text instead of the call", reply: llm.NewText(llm.RoleAssistant, "Sure!"), want: ErrNoCall},
		{name: "another tool", reply: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
			Call: &llm.ToolCall{ID: "x", Name: "read_file", Arguments: json.RawMessage(`{}`)}}}}, want: ErrNoCall},
		{name: "not JSON", reply: call(`{"history_entry": "x`), want: ErrBadArguments},
		{name: "wrong types", reply: call(`{"history_entry": "x", "memory_update": {"facts": []}}`), want: ErrBadArguments},
		{name: "no history entry", reply: call(`{"memory_update": "# M"}`), want: ErrBadArguments},
		{name: "blank history entry", reply: call(saveArgs("  ", mem)), want: ErrBadArguments},
		{name: "no memory update", reply: call(`{"history_entry": "x"}`), want: ErrBadArguments},
		{name: "wipes the memory", reply: call(saveArgs("x", "\n")), want: ErrBadArguments},
		{name: "provider error", err: &llm.APIError{Status: 500, Message: "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dir := testFiles(t, map[string]string{MemoryFile: mem})
			m := &model{reply: func(llm.Request) (llm.Message, error) { return tt.reply, tt.err }}
			err := newTestConsolidator(t, f, m).Consolidate(context.Background(), "", "k", conversation())
			if tt.err != nil {
				var api *llm.APIError
				if !errors.As(err, &api) {
					t.Fatalf("err = %v, want the provider's error", err)
				}
			} else if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if read(t, dir, MemoryFile) != mem || read(t, dir, HistoryFile) != "" {
				t.Error("a failed consolidation wrote the files")
			}
		})
	}
}

func TestConsolidateRedoesOnConflict(t *testing.T) {
	f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
	m := &model{}
	m.onCall = func() {
		// The first call races with an edit_file by the main agent.
		if m.calls == 1 {
			if err := os.WriteFile(filepath.Join(dir, MemoryFile), []byte("# Memory\n- edited by the agent\n"), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	m.reply = func(req llm.Request) (llm.Message, error) {
		prompt := req.Messages[0].Text()
		mem, _, _ := strings.Cut(strings.SplitN(prompt, "## Current MEMORY.md\n\n", 2)[1], "\n## Conversation")
		return call(saveArgs("[2025-03-14 09:30] Trip.", mem+"- trip to Lisbon\n")), nil
	}
	if err := newTestConsolidator(t, f, m).Consolidate(context.Background(), "", "k", conversation()); err != nil {
		t.Fatal(err)
	}
	if m.calls != 2 {
		t.Errorf("%d model calls, want 2 (redone after the conflict)", m.calls)
	}
	if got := read(t, dir, MemoryFile); got != "# Memory\n- edited by the agent\n- trip to Lisbon\n" {
		t.Errorf("MEMORY.md = %q: the concurrent edit was lost", got)
	}
	if got := read(t, dir, HistoryFile); strings.Count(got, "Trip.") != 1 {
		t.Errorf("HISTORY.md = %q", got)
	}
}

func TestConsolidateGivesUpOnEndlessConflicts(t *testing.T) {
	f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
	n := 0
	m := &model{}
	m.onCall = func() {
		n++
		if err := os.WriteFile(filepath.Join(dir, MemoryFile), []byte("# Memory\n- edit "+string(rune('0'+n))+"\n"), 0o600); err != nil {
			t.Error(err)
		}
	}
	m.reply = func(llm.Request) (llm.Message, error) { return call(saveArgs("x", "# Memory\n- mine\n")), nil }
	err := newTestConsolidator(t, f, m).Consolidate(context.Background(), "", "k", conversation())
	if !errors.Is(err, ErrConflict) || m.calls != 3 {
		t.Errorf("err = %v after %d calls, want ErrConflict after 3", err, m.calls)
	}
}

func TestRequestShrinksToFitTheContextWindow(t *testing.T) {
	f, _ := testFiles(t, nil)
	var msgs []llm.Message
	for range 40 {
		msgs = append(msgs, conversation()...)
	}
	m := &model{window: 12000, reply: func(llm.Request) (llm.Message, error) { return call(saveArgs("x", "# M\n")), nil }}
	c := NewConsolidator(f, m, Config{MaxTokens: 1000, Location: time.UTC}, zaptest.NewLogger(t))
	req := c.request("", "k", "", msgs)
	text := req.Messages[0].Text()
	if got := history.EstimateText(text); got > 12000-1000 {
		t.Errorf("prompt of ~%d tokens does not fit a 12000-token window", got)
	}
	if strings.Contains(text, "line of the file\n  line of the file") || !strings.Contains(text, "read_file result: read_file(") {
		t.Errorf("tool results should shrink to their one-line gist:\n%.2000s", text)
	}
}

func TestDump(t *testing.T) {
	f, dir := testFiles(t, map[string]string{HistoryFile: "# History\n\n[2025-03-13 20:00] Earlier entry.\n"})
	c := newTestConsolidator(t, f, &model{})
	if err := c.Dump("telegram:42", conversation(), errors.New("memory: consolidate telegram:42: the model did not call save_memory")); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "dump.md", read(t, dir, HistoryFile))
}

// TestCommitRefusesHostileFiles: MEMORY.md or HISTORY.md as a link to a
// file outside, a FIFO or a 64 GB file: a consolidation fails with the
// reason, at once (no read waits on the FIFO or swallows the huge file),
// and nothing outside is read or written.
func TestCommitRefusesHostileFiles(t *testing.T) {
	plants := map[string]func(t *testing.T, full, outside string){
		"link out": func(t *testing.T, full, outside string) {
			if err := os.Symlink(outside, full); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO": func(t *testing.T, full, _ string) {
			if err := syscall.Mkfifo(full, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"64 GB": func(t *testing.T, full, _ string) {
			if err := os.WriteFile(full, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(full, 64<<30); err != nil {
				t.Skip("no sparse files:", err)
			}
		},
	}
	for _, rel := range []string{MemoryFile, HistoryFile} {
		for name, plant := range plants {
			t.Run(rel+"/"+name, func(t *testing.T) {
				f, dir := testFiles(t, map[string]string{"memory/.keep": ""})
				outside := filepath.Join(t.TempDir(), "victim")
				if err := os.WriteFile(outside, []byte("api_key: sk-SECRET\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				plant(t, filepath.Join(dir, filepath.FromSlash(rel)), outside)
				mem, memErr := f.Memory()
				if strings.Contains(mem, "SECRET") {
					t.Fatal("MEMORY.md read the file outside")
				}
				err := f.Commit(mem, "new facts", "[2025-01-01 10:00] x")
				if memErr == nil && rel == MemoryFile || err == nil && !(rel == HistoryFile && name == "64 GB") {
					t.Errorf("Memory: %v, Commit: %v; want the bad file refused", memErr, err)
				}
				if got := read(t, filepath.Dir(outside), "victim"); got != "api_key: sk-SECRET\n" {
					t.Errorf("the file outside was changed: %q", got)
				}
			})
		}
	}
}
