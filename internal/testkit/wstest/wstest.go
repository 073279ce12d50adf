// Package wstest opens a workspace for tests the way the daemon does
// (workspace.Files), closed when the test ends.
package wstest

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Files opens the workspace dir, which must exist, logging to the test.
func Files(tb testing.TB, dir string) *workspace.Files {
	tb.Helper()
	f, err := workspace.OpenFiles(dir, zaptest.NewLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}
