package tools

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/filelocktest"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

const toolsHelper = "TestToolsHelperProcess"

// TestToolsHelperProcess is another process sharing the workspace
// TOOLSTEST_DIR (a consolidation in another agent worker): it holds the
// lock of TOOLSTEST_FILE while it rewrites the file.
func TestToolsHelperProcess(t *testing.T) {
	if !filelocktest.IsChild(toolsHelper) {
		t.Skip("runs only as the helper process of the cross-process tests")
	}
	dir, rel, parent := os.Getenv("TOOLSTEST_DIR"), os.Getenv("TOOLSTEST_FILE"), filelocktest.ParentOf()
	root, err := workspace.OpenRoot(dir, workspace.Options{Restrict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	release, err := root.Guard(rel)
	if err != nil {
		t.Fatal(err)
	}
	parent.Say("locked")
	parent.Hear()
	if err := root.WriteFileAtomic(rel, []byte("# Memory\n- from the other process\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	release()
	parent.Say("released")
}

// edit_file on a file another process is rewriting under its lock waits,
// then edits what that process wrote instead of replacing it with an edit
// of the old text.
func TestEditFileWaitsForAnotherProcessRewritingTheFile(t *testing.T) {
	for _, rel := range []string{"memory/MEMORY.md", "USER.md"} {
		t.Run(rel, func(t *testing.T) {
			ws, dir := testWorkspace(t, true, map[string]string{rel: "# Memory\n"})
			other := filelocktest.Start(t, toolsHelper, "TOOLSTEST_DIR="+dir, "TOOLSTEST_FILE="+rel)
			other.Expect(t, "locked")
			var res llm.ToolResult
			var wg sync.WaitGroup
			wg.Go(func() {
				res = runTool(t, NewEditFile(ws), map[string]string{"path": rel, "old_text": "# Memory", "new_text": "# Memories"})
			})
			other.Send(t, "go")
			other.Expect(t, "released")
			wg.Wait()
			if err := other.Wait(); err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("edit_file: %s", res.Content.Live)
			}
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "# Memories\n- from the other process\n" {
				t.Errorf("%s = %q: one of the two writes was lost", rel, got)
			}
		})
	}
}
