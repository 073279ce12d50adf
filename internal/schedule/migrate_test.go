package schedule

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The workspace's old jobs file is hostile: whatever a command made of it
// (a link out of the workspace, a FIFO, a huge file, not JSON), Migrate
// neither hangs nor follows it nor reads it whole; it marks the migration
// done and never looks at the workspace again.
func TestMigrateTreatsTheWorkspaceFileAsHostile(t *testing.T) {
	valid := `{"version": 1, "jobs": [{"id": "aa", "message": "hi", "schedule": {"kind": "every", "every": "1h0m0s"},
  "chat": {"channel": "telegram", "chat_id": "42", "sender_id": "7", "session_key": "telegram:42"},
  "created_at": "2025-01-01T11:00:00Z", "next_run": "2025-01-01T12:00:00Z"}]}`
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, file, outside string)
		want  int
	}{
		{"a valid file", func(t *testing.T, file, _ string) { write(t, file, valid) }, 1},
		{"a link out of the workspace", func(t *testing.T, file, outside string) {
			write(t, outside, valid)
			if err := os.Symlink(outside, file); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"a FIFO", func(t *testing.T, file, _ string) {
			if err := syscall.Mkfifo(file, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"a huge sparse file", func(t *testing.T, file, _ string) {
			write(t, file, valid)
			if err := os.Truncate(file, 64<<30); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"not JSON", func(t *testing.T, file, _ string) { write(t, file, "\xff\xfe not json") }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, state := t.TempDir(), t.TempDir()
			file := filepath.Join(ws, workspace.LegacyJobsFile)
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(t.TempDir(), "secret.json")
			tc.plant(t, file, outside)
			c := NewCron(CronConfig{Path: filepath.Join(state, "cron", "jobs.json")}, CronDeps{}, zaptest.NewLogger(t))
			n, err := c.Migrate(wstest.Files(t, ws), func(ch Chat) (Chat, error) { return ch, nil })
			if err != nil || n != tc.want {
				t.Fatalf("Migrate = %d, %v; want %d", n, err, tc.want)
			}
			if _, err := os.Lstat(file); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the workspace file is still there: %v", err)
			}
			if tc.name == "a link out of the workspace" {
				if _, err := os.Stat(outside); err != nil {
					t.Errorf("the link's target was touched: %v", err)
				}
			}
			// Done once: a file planted again is never read.
			write(t, file, valid)
			again := NewCron(CronConfig{Path: filepath.Join(state, "cron", "jobs.json")}, CronDeps{}, zaptest.NewLogger(t))
			if n, err := again.Migrate(wstest.Files(t, ws), nil); err != nil || n != 0 {
				t.Errorf("a second Migrate = %d, %v; want 0", n, err)
			}
		})
	}
}

// Each entry passes the cron tool's checks; the chat check decides the
// rest, and the chat it returns is the one kept.
func TestMigrateChecksEachEntryLikeTheTool(t *testing.T) {
	entry := func(id, sched, msg string) string {
		return `{"id": "` + id + `", "message": "` + msg + `", "schedule": ` + sched + `,
  "chat": {"channel": "telegram", "chat_id": "42", "sender_id": "7", "session_key": "telegram:42", "metadata": {"source": "cron"}},
  "created_at": "2025-01-01T11:00:00Z", "next_run": "2025-01-01T12:00:00Z"}`
	}
	hourly := `{"kind": "every", "every": "1h0m0s"}`
	jobs := []string{
		entry("ok", hourly, "hi"),
		entry("fast", `{"kind": "every", "every": "2s"}`, "hi"),
		entry("empty", hourly, ""),
		entry("huge", hourly, strings.Repeat("x", DefaultMaxJobMessage+1)),
		entry("never", `{"kind": "cron", "expr": "0 0 30 2 *"}`, "hi"),
		entry("ok", hourly, "twice"),
		entry("refused", hourly, "hi"),
	}
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, workspace.LegacyJobsFile), `{"version": 1, "jobs": [`+strings.Join(jobs, ",")+`]}`)
	c := NewCron(CronConfig{Path: filepath.Join(state, "cron", "jobs.json")}, CronDeps{}, zaptest.NewLogger(t))
	n, err := c.Migrate(wstest.Files(t, ws), func(ch Chat) (Chat, error) {
		if ch.ChatID == "42" && len(c.jobs) > 0 {
			return ch, errors.New("refused by the test")
		}
		return ch, nil
	})
	if err != nil || n != 1 {
		t.Fatalf("Migrate = %d, %v; want 1", n, err)
	}
	got, err := c.All()
	if err != nil || len(got) != 1 || got[0].ID != "ok" || Scheduled(got[0].Chat.Metadata) {
		t.Errorf("jobs after migration: %+v (%v); want job ok without a run's metadata", got, err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
