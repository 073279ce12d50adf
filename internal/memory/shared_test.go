package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/filelocktest"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Agent workers of a split gateway share the workspace on one volume. These
// tests race real processes (this test binary started again, running
// TestMemoryHelperProcess) on one workspace.

const helper = "TestMemoryHelperProcess"

// TestMemoryHelperProcess is the other process. MEMTEST_MODE says what it
// does in the workspace MEMTEST_DIR; it talks to the test over stdio.
func TestMemoryHelperProcess(t *testing.T) {
	if !filelocktest.IsChild(helper) {
		t.Skip("runs only as the helper process of the cross-process tests")
	}
	root, err := workspace.OpenFiles(os.Getenv("MEMTEST_DIR"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files, name, parent := NewFiles(root), os.Getenv("MEMTEST_NAME"), filelocktest.ParentOf()
	n, _ := strconv.Atoi(os.Getenv("MEMTEST_N"))
	switch mode := os.Getenv("MEMTEST_MODE"); mode {
	case "consolidate":
		for round := range n {
			c := newTestConsolidator(t, files, barrierModel(parent, fmt.Sprintf("%s-%d", name, round)))
			if err := c.Consolidate(context.Background(), "", name, conversation()); err != nil {
				t.Fatal(err)
			}
			parent.Say("done")
		}
	case "append":
		parent.Say("ready")
		parent.Hear()
		for i := range n {
			if err := files.AppendHistory(historyEntry(name, i)); err != nil {
				t.Fatal(err)
			}
		}
		parent.Say("done")
	case "hold":
		// Holds the memory lock, as a consolidation's commit in another
		// worker does, and changes MEMORY.md while holding it.
		release, err := root.Guard(MemoryFile)
		if err != nil {
			t.Fatal(err)
		}
		parent.Say("locked")
		parent.Hear()
		if err := root.WriteFileAtomic(MemoryFile, []byte("# Memory\n- written by "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		release()
		parent.Say("released")
	default:
		t.Fatalf("unknown MEMTEST_MODE %q", mode)
	}
}

// barrierModel answers save_memory with the memory it was given plus one
// fact. On its first call it tells the parent it has read MEMORY.md and
// waits to be let go, so two processes both hold the same base when they
// commit: the instant the old check-and-rename could lose one of them.
func barrierModel(parent *filelocktest.Parent, fact string) *model {
	m := &model{}
	m.onCall = func() {
		if m.calls == 1 {
			parent.Say("ready")
			parent.Hear()
		}
	}
	m.reply = func(req llm.Request) (llm.Message, error) {
		mem := currentMemory(req)
		return call(saveArgs("[2025-03-14 09:30] entry "+fact+".", mem+"- fact "+fact+"\n")), nil
	}
	return m
}

// currentMemory is the MEMORY.md a consolidation request shows the model.
func currentMemory(req llm.Request) string {
	prompt := req.Messages[0].Text()
	mem, _, _ := strings.Cut(strings.SplitN(prompt, "## Current MEMORY.md\n\n", 2)[1], "\n## Conversation")
	if mem == "(empty)\n" {
		return ""
	}
	return mem
}

// historyEntry is long, so that two unlocked appends would have room to
// interleave or overwrite each other.
func historyEntry(name string, i int) string {
	return fmt.Sprintf("[2025-01-01 10:00] %s entry %d: %s", name, i, strings.Repeat(name, 4000))
}

func startHelper(t *testing.T, dir, mode, name string, n int) *filelocktest.Child {
	t.Helper()
	return filelocktest.Start(t, helper, "MEMTEST_DIR="+dir, "MEMTEST_MODE="+mode, "MEMTEST_NAME="+name, "MEMTEST_N="+strconv.Itoa(n))
}

func waitAll(t *testing.T, children ...*filelocktest.Child) {
	t.Helper()
	for _, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// Two workers' consolidations read the same MEMORY.md and commit at once,
// round after round: one commits, the other finds MEMORY.md changed and
// merges again, so every fact of both ends up in MEMORY.md and every
// history entry is written once.
func TestConsolidationsInTwoProcessesLoseNoFact(t *testing.T) {
	_, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
	const rounds = 8
	a, b := startHelper(t, dir, "consolidate", "a", rounds), startHelper(t, dir, "consolidate", "b", rounds)
	for range rounds {
		a.Expect(t, "ready")
		b.Expect(t, "ready")
		a.Send(t, "go")
		b.Send(t, "go")
		a.Expect(t, "done")
		b.Expect(t, "done")
	}
	waitAll(t, a, b)

	mem, hist := read(t, dir, MemoryFile), read(t, dir, HistoryFile)
	for _, name := range []string{"a", "b"} {
		for round := range rounds {
			fact := fmt.Sprintf("%s-%d", name, round)
			if n := strings.Count(mem, "- fact "+fact+"\n"); n != 1 {
				t.Errorf("MEMORY.md holds fact %s %d times, want once", fact, n)
			}
			if n := strings.Count(hist, "entry "+fact+"."); n != 1 {
				t.Errorf("HISTORY.md holds the entry of %s %d times, want once", fact, n)
			}
		}
	}
	if t.Failed() {
		t.Logf("MEMORY.md:\n%s", mem)
	}
}

// Two processes append to HISTORY.md at once: every entry is there once,
// whole, one paragraph each.
func TestHistoryAppendsInTwoProcessesInterleaveNothing(t *testing.T) {
	_, dir := testFiles(t, nil)
	const each = 100
	a, b := startHelper(t, dir, "append", "a", each), startHelper(t, dir, "append", "b", each)
	a.Expect(t, "ready")
	b.Expect(t, "ready")
	a.Send(t, "go")
	b.Send(t, "go")
	a.Expect(t, "done")
	b.Expect(t, "done")
	waitAll(t, a, b)

	var want []string
	for _, name := range []string{"a", "b"} {
		for i := range each {
			want = append(want, historyEntry(name, i))
		}
	}
	got := strings.Split(strings.TrimSuffix(read(t, dir, HistoryFile), "\n"), "\n\n")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("HISTORY.md has %d paragraphs, want the %d entries, each once and whole", len(got), len(want))
	}
}

// While another process holds the memory lock and changes MEMORY.md, a
// commit here waits for it and then refuses: it never replaces what the
// other process wrote, whichever of the two reached the file first.
func TestCommitWaitsForAnotherProcessAndSeesItsChange(t *testing.T) {
	tests := []struct {
		name   string
		commit func(f *Files, base string) error
		// wantErr is the error the commit must end with.
		wantErr error
	}{
		{"a commit that changes MEMORY.md", func(f *Files, base string) error {
			return f.Commit(base, base+"- from here\n", "[2025-01-01 10:00] here")
		}, ErrConflict},
		{"a commit that leaves it as it was", func(f *Files, base string) error {
			return f.Commit(base, base, "[2025-01-01 10:00] here")
		}, ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
			base, err := f.Memory()
			if err != nil {
				t.Fatal(err)
			}
			other := startHelper(t, dir, "hold", "the other worker", 0)
			other.Expect(t, "locked")
			var wg sync.WaitGroup
			var commitErr error
			wg.Go(func() { commitErr = tc.commit(f, base) })
			other.Send(t, "go")
			other.Expect(t, "released")
			wg.Wait()
			waitAll(t, other)
			if !errors.Is(commitErr, tc.wantErr) {
				t.Errorf("commit: %v, want %v", commitErr, tc.wantErr)
			}
			if got := read(t, dir, MemoryFile); got != "# Memory\n- written by the other worker\n" {
				t.Errorf("MEMORY.md = %q: the other process's write was replaced", got)
			}
			if got := read(t, dir, HistoryFile); got != "" {
				t.Errorf("HISTORY.md = %q after a refused commit", got)
			}
		})
	}
}

// The lock files sit next to what they guard; a normal read takes none.
func TestReadingMemoryTakesNoLock(t *testing.T) {
	f, dir := testFiles(t, map[string]string{MemoryFile: "# Memory\n"})
	if _, err := f.Memory(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(workspace.MemoryLock))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read created the lock file (%v)", err)
	}
	if err := f.AppendHistory("[2025-01-01 10:00] x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(workspace.MemoryLock))); err != nil {
		t.Errorf("an append left no lock file: %v", err)
	}
}
