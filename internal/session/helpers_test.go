package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the start of every test clock.
var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// stepClock returns a clock that starts at t0 and advances by step on every
// reading, so files written in tests are byte-for-byte reproducible.
func stepClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := now
		now = now.Add(step)
		return t
	}
}

// logs is a logger that also records warnings for assertions.
type logs struct {
	*zap.Logger
	seen *observer.ObservedLogs
}

func newLogs(t *testing.T) logs {
	t.Helper()
	core, seen := observer.New(zapcore.WarnLevel)
	return logs{zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), seen}
}

// warnings returns the messages of the warnings logged since the last call.
func (l logs) warnings() []string {
	var out []string
	for _, e := range l.seen.TakeAll() {
		out = append(out, e.Message)
	}
	return out
}

// withCache gives opts the cache bounds the daemon passes with an empty
// config file (agents.session_cache, session_cache_bytes) where it has none:
// the store defaults neither.
func withCache(opts Options) Options {
	d := config.Defaults().Agents
	if opts.CacheSize == 0 {
		opts.CacheSize = d.SessionCache
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = d.SessionCacheBytes
	}
	return opts
}

// newStore returns a store over dir, with withCache's bounds, that is closed
// when the test ends.
func newStore(t *testing.T, dir string, opts Options, log *zap.Logger) *Store {
	t.Helper()
	opts = withCache(opts)
	if opts.Clock == nil {
		opts.Clock = clock.Func(stepClock(time.Second))
	}
	s := NewStore(dir, opts, log)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// reopen loads key from dir with a fresh store, as after a restart.
func reopen(t *testing.T, dir, key string) Snapshot {
	t.Helper()
	snap, err := newStore(t, dir, Options{}, zaptest.NewLogger(t)).Get(key)
	if err != nil {
		t.Fatalf("reopen %s: %v", key, err)
	}
	return snap
}

func mustAppend(t *testing.T, s *Store, key string, msgs ...llm.Message) Snapshot {
	t.Helper()
	snap, err := s.Append(key, msgs...)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return snap
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sessionFile is the live file of key in dir.
func sessionFile(dir, key string) string { return filepath.Join(dir, FileStem(key)+liveExt) }

// equalMessages fails the test when got and want differ, showing both as JSON.
func equalMessages(t *testing.T, got, want []llm.Message) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages differ\n got: %s\nwant: %s", asJSON(t, got), asJSON(t, want))
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func userText(s string) llm.Message {
	m := llm.NewText(llm.RoleUser, s)
	m.Time = t0
	return m
}

// sampleTurn holds one message of every part kind, with fixed times, so a
// round trip can be compared exactly.
func sampleTurn() []llm.Message {
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	return []llm.Message{
		{Role: llm.RoleSystem, Time: at(0), Parts: []llm.Part{llm.Text("You are nanobot.")}},
		{Role: llm.RoleUser, Time: at(1), Parts: []llm.Part{
			{Kind: llm.PartText, Text: "long paste <b>&</b> " + strings.Repeat("x", 40), Summary: "long paste […]", Gist: "user pasted 60 chars"},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/jpeg", URL: "https://example.com/cat.jpg"}},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/webp", Path: "media/x.webp"}},
			{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "media/report.pdf", MIME: "application/pdf", Size: 12345, Name: "report.pdf"}},
		}},
		{Role: llm.RoleAssistant, Time: at(2), Parts: []llm.Part{
			{Kind: llm.PartThinking, Text: "The user wants the report read.", Signature: "sig-AbC123=="},
			{Kind: llm.PartThinking, Text: "ENCRYPTED-PAYLOAD", Redacted: true},
			llm.Text("Let me look."),
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"media/report.pdf","limit":200}`)}},
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_2", Name: "exec", RawArgs: `{"cmd": "ls`, ParseError: "unexpected end of JSON input"}},
		}, Meta: &llm.Meta{Route: "openai/gpt-4o-mini", Provider: "openai", API: "openai", Model: "gpt-4o-mini",
			Usage: llm.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 1000, ReasoningTokens: 30}, StopReason: "tool_calls"}},
		{Role: llm.RoleTool, Time: at(3), Parts: []llm.Part{
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_1", Name: "read_file",
				Content: llm.Content{Live: "page 1\npage 2\npage 3", Summary: "page 1\n[…]\npage 3", Gist: "read_file media/report.pdf: ok, 3 lines"},
				Elapsed: 1500 * time.Millisecond}},
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_2", Name: "exec", IsError: true,
				Content: llm.PlainContent("arguments are not valid JSON: unexpected end of JSON input"),
				Images:  []llm.Image{{MIME: "image/png", Path: "media/screen.png"}}}},
		}},
		{Role: llm.RoleAssistant, Time: at(4), Parts: []llm.Part{llm.Text("The report has 3 pages. ünïcödé ✓ 🚀")},
			Meta: &llm.Meta{Model: "gpt-4o-mini", Synthetic: true}},
	}
}
