package web

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The token file is never seen empty, and one token wins: starts racing
// each other and readers (the login, `nanobot web token`) racing the start
// see no file or the whole token, and nothing is left beside it.
func TestEnsureTokenFileNeverEmpty(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "web-token")
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, seen := 0, map[string]bool{}
		for range 4 {
			wg.Go(func() {
				ok, err := EnsureTokenFile(path)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				if ok {
					created++
				}
				mu.Unlock()
			})
			wg.Go(func() {
				for range 50 {
					tok, err := ReadTokenFile(path)
					// Not there yet is fine; anything else (an empty file) is not.
					if err != nil && !strings.Contains(err.Error(), "does not exist") {
						t.Errorf("round %d: %v", round, err)
						return
					}
					if tok != "" {
						mu.Lock()
						seen[tok] = true
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if created != 1 {
			t.Fatalf("round %d: %d starts created the token, want 1", round, created)
		}
		final, err := ReadTokenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for tok := range seen {
			if tok != final {
				t.Fatalf("round %d: a reader saw token %q, the file holds %q", round, tok, final)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("round %d: %d files in the data dir, want only the token", round, len(entries))
		}
	}
}
