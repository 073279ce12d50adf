package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/testkit/filelocktest"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The panel is served by one process (the channels process of a split
// gateway) while consolidations run in others, on the same workspace. These
// tests race the panel against real processes: this test binary started
// again, running TestPanelHelperProcess.

const panelHelper = "TestPanelHelperProcess"

// TestPanelHelperProcess is the other process. PANELTEST_MODE says what it
// does in the workspace PANELTEST_DIR; it talks to the test over stdio.
func TestPanelHelperProcess(t *testing.T) {
	if !filelocktest.IsChild(panelHelper) {
		t.Skip("runs only as the helper process of the cross-process tests")
	}
	dir, rel, parent := os.Getenv("PANELTEST_DIR"), os.Getenv("PANELTEST_FILE"), filelocktest.ParentOf()
	switch mode := os.Getenv("PANELTEST_MODE"); mode {
	case "hold":
		// Another writer of the file (a consolidation's commit, edit_file,
		// another panel) holds its lock and changes it meanwhile.
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		release, err := workspace.Guard(root, rel)
		if err != nil {
			t.Fatal(err)
		}
		parent.Say("locked")
		parent.Hear()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel+".tmp"), []byte("written by the other process\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, rel+".tmp"), filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
		release()
		parent.Say("released")
	case "consolidate":
		root, err := workspace.OpenFiles(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		files := memory.NewFiles(root)
		rounds, _ := strconv.Atoi(os.Getenv("PANELTEST_N"))
		for round := range rounds {
			m := &factModel{fact: fmt.Sprint("fact ", round), before: func() { parent.Say("ready"); parent.Hear() }}
			c := memory.NewConsolidator(files, m, memory.Config{MaxTokens: config.Defaults().Agents.MaxTokens}, zap.NewNop())
			msgs := []llm.Message{llm.NewText(llm.RoleUser, "hello"), llm.NewText(llm.RoleAssistant, "hi")}
			if err := c.Consolidate(context.Background(), "", "telegram:42", msgs); err != nil {
				t.Fatal(err)
			}
			parent.Say("done")
		}
	default:
		t.Fatalf("unknown PANELTEST_MODE %q", mode)
	}
}

// factModel answers save_memory with the MEMORY.md it was shown plus its
// fact. Before its first answer it runs before: the consolidation has read
// MEMORY.md and holds no lock, as during a real model call.
type factModel struct {
	fact   string
	before func()
	calls  int
}

func (m *factModel) Complete(_ context.Context, _ string, req llm.Request, _ func(llm.Delta)) (llm.Message, error) {
	m.calls++
	if m.calls == 1 {
		m.before()
	}
	prompt := req.Messages[0].Text()
	mem, _, _ := strings.Cut(strings.SplitN(prompt, "## Current MEMORY.md\n\n", 2)[1], "\n## Conversation")
	if mem == "(empty)\n" {
		mem = ""
	}
	args, _ := json.Marshal(map[string]string{"history_entry": "[2025-03-14 09:30] " + m.fact + ".", "memory_update": mem + "- " + m.fact + "\n"})
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
		Call: &llm.ToolCall{ID: "c", Name: memory.ToolName, Arguments: args}}}}, nil
}

func (m *factModel) ContextWindow(string) int { return 128000 }

func startPanelHelper(t *testing.T, dir, mode, rel string, n int) *filelocktest.Child {
	t.Helper()
	return filelocktest.Start(t, panelHelper, "PANELTEST_DIR="+dir, "PANELTEST_MODE="+mode, "PANELTEST_FILE="+rel, "PANELTEST_N="+strconv.Itoa(n))
}

// An edit saved while another process holds the file's lock and changes the
// file waits for it, sees the change and is refused with the message that
// tells the user what to do; the other process's text stays.
func TestPanelEditWaitsForAnotherProcessAndIsRefused(t *testing.T) {
	for _, f := range []struct{ name, rel string }{
		{"MEMORY.md", "memory/MEMORY.md"},
		{"SOUL.md", "SOUL.md"},
	} {
		t.Run(f.name, func(t *testing.T) {
			e := newPanelEnv(t)
			c := e.login()
			var loaded struct{ ETag string }
			decode(t, e.do(c, "GET", "/api/panel/files/"+f.name, nil), &loaded)

			other := startPanelHelper(t, e.ws, "hold", f.rel, 0)
			other.Expect(t, "locked")
			var resp *http.Response
			var wg sync.WaitGroup
			wg.Go(func() {
				resp = e.do(c, "PUT", "/api/panel/files/"+f.name, map[string]string{"content": "my edit\n"}, "If-Match", loaded.ETag)
			})
			other.Send(t, "go")
			other.Expect(t, "released")
			wg.Wait()
			if err := other.Wait(); err != nil {
				t.Fatal(err)
			}
			if text := body(resp); resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(text, "changed since you opened it") {
				t.Errorf("save: %d %s, want 412 saying the file changed", resp.StatusCode, text)
			}
			if got, _ := os.ReadFile(filepath.Join(e.ws, f.rel)); string(got) != "written by the other process\n" {
				t.Errorf("%s = %q: the other process's write was overwritten", f.rel, got)
			}
		})
	}
}

// Panel edits and consolidations in another process, both working from the
// same MEMORY.md and saving at once, round after round: whichever saves
// first, the other notices. An edit is either saved and kept (the
// consolidation merged it) or refused with the message; every fact of the
// consolidations is in MEMORY.md.
func TestPanelEditRacingAConsolidationInAnotherProcess(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	const rounds = 8
	other := startPanelHelper(t, e.ws, "consolidate", "", rounds)
	saved := map[int]bool{}
	for round := range rounds {
		var loaded struct{ Content, ETag string }
		decode(t, e.do(c, "GET", "/api/panel/files/MEMORY.md", nil), &loaded)
		other.Expect(t, "ready") // it has read MEMORY.md and is "asking the model"
		var resp *http.Response
		var wg sync.WaitGroup
		wg.Go(func() {
			edit := loaded.Content + fmt.Sprintf("- panel edit %d\n", round)
			resp = e.do(c, "PUT", "/api/panel/files/MEMORY.md", map[string]string{"content": edit}, "If-Match", loaded.ETag)
		})
		other.Send(t, "go")
		other.Expect(t, "done")
		wg.Wait()
		switch text := body(resp); {
		case resp.StatusCode == http.StatusOK:
			saved[round] = true
		case resp.StatusCode == http.StatusPreconditionFailed && strings.Contains(text, "changed since you opened it"):
		default:
			t.Fatalf("round %d: save: %d %s", round, resp.StatusCode, text)
		}
	}
	if err := other.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(e.ws, "memory", "MEMORY.md"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		if n := strings.Count(string(got), fmt.Sprintf("- fact %d\n", round)); n != 1 {
			t.Errorf("MEMORY.md holds fact %d %d times, want once", round, n)
		}
		edit := fmt.Sprintf("- panel edit %d\n", round)
		if strings.Contains(string(got), edit) != saved[round] {
			t.Errorf("round %d: the edit was saved: %v, but MEMORY.md holds it: %v", round, saved[round], !saved[round])
		}
	}
	if t.Failed() {
		t.Logf("MEMORY.md:\n%s", got)
	}
}
