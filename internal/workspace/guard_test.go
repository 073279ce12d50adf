package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLockOf(t *testing.T) {
	tests := []struct {
		rel, want string
		ok        bool
	}{
		{"memory/MEMORY.md", MemoryLock, true},
		{"memory/HISTORY.md", MemoryLock, true},
		{"./memory/../memory/MEMORY.md", MemoryLock, true},
		{"AGENTS.md", BootstrapLock, true},
		{"SOUL.md", BootstrapLock, true},
		{"USER.md", BootstrapLock, true},
		{"TOOLS.md", BootstrapLock, true},
		{"HEARTBEAT.md", BootstrapLock, true},
		{"notes/USER.md", "", false},
		{"memory/notes.md", "", false},
		{"cron/jobs.json", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			if got, ok := LockOf(tc.rel); got != tc.want || ok != tc.ok {
				t.Errorf("LockOf(%q) = %q, %v; want %q, %v", tc.rel, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// Guard creates the lock next to a guarded file (and its directory), and
// nothing for other files; two holds of one lock in one process take turns,
// since every hold opens the lock file anew.
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenRoot(dir, Options{Restrict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	release, err := r.Guard("memory/MEMORY.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "memory", ".memory.lock")); err != nil {
		t.Errorf("no lock file: %v", err)
	}
	second := make(chan func())
	go func() {
		again, err := r.Guard(filepath.Join(dir, "memory", "HISTORY.md"))
		if err != nil {
			t.Error(err)
			again = func() {}
		}
		second <- again
	}()
	release()
	(<-second)()

	release, err = r.Guard("notes.md")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := os.Stat(filepath.Join(dir, BootstrapLock)); !os.IsNotExist(err) {
		t.Errorf("a lock was made for a file nobody else writes (%v)", err)
	}
	if _, err := r.Guard("sessions/x.jsonl"); err == nil {
		t.Error("Guard accepted a path in sessions/")
	}
}
