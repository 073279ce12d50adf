package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// testWorkspace makes a workspace directory with the given files (path ->
// content) and a sessions/ log, and opens it.
func testWorkspace(t *testing.T, restrict bool, files map[string]string) (*workspace.Root, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files["sessions/telegram_42.jsonl"] = `{"role":"user"}` + "\n"
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.OpenRoot(dir, workspace.Options{Restrict: restrict, Home: filepath.Dir(dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, dir
}

// runTool executes one call of tool through a registry, so that argument
// validation and the output cap apply as in production.
func runTool(t *testing.T, tool Tool, args any) llm.ToolResult {
	t.Helper()
	return runToolCtx(t, context.Background(), tool, args)
}

func runToolCtx(t *testing.T, ctx context.Context, tool Tool, args any) llm.ToolResult {
	t.Helper()
	r := NewRegistry(RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res := r.Execute(ctx, llm.ToolCall{ID: "c1", Name: tool.Spec().Name, Arguments: raw}, Origin{Channel: "telegram", ChatID: "42"})
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return res
}

type args = map[string]any

// check asserts a result's error flag and that its text contains every want.
func check(t *testing.T, res llm.ToolResult, isError bool, want ...string) {
	t.Helper()
	got := res.Content.Live
	shown := got
	if len(shown) > 1500 {
		shown = shown[:700] + "\n[...]\n" + shown[len(shown)-700:]
	}
	if res.IsError != isError {
		t.Fatalf("is_error = %v, want %v; text:\n%s", res.IsError, isError, shown)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("result lacks %q; text:\n%s", w, shown)
		}
	}
}

func readWS(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
