package daemon

// The schedule's state is not where a command can write it
// (docs/schedule.md#where-jobs-live):
// a jobs file forged in the workspace by one exec call is hostile input.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// forgedJob is one entry of a jobs file as a command writes it by hand.
func forgedJob(id, every string, channel string, chat, sender int64, key string) string {
	sched := `{"kind": "at", "at": "2025-01-01T12:00:00Z"}`
	if every != "" {
		sched = fmt.Sprintf(`{"kind": "every", "every": %q}`, every)
	}
	return fmt.Sprintf(`{"id": %q, "message": "Say hello (%s).", "schedule": %s,
  "chat": {"channel": %q, "chat_id": "%d", "sender_id": "%d", "session_key": %q},
  "created_at": "2025-01-01T11:00:00Z", "next_run": "2025-01-01T11:59:00Z"}`, id, id, sched, channel, chat, sender, key)
}

// forgedJobs is the jobs file: a job for a Telegram user not on the
// allowlist (daily, else valid), the owner's chat every 2 s (under the one-minute
// minimum), a job whose session key is another chat's, and an old version's
// one-time job of the owner's, which is fine.
func forgedJobs() string {
	return `{"version": 1, "jobs": [` + strings.Join([]string{
		forgedJob("5742a93e", "24h", "telegram", stranger, stranger, fmt.Sprintf("telegram:%d", stranger)),
		forgedJob("f00dfeed", "2s", "telegram", owner, owner, fmt.Sprintf("telegram:%d", owner)),
		forgedJob("0ffkey00", "24h", "telegram", owner, owner, fmt.Sprintf("telegram:%d", stranger)),
		forgedJob("0badcafe", "", "telegram", owner, owner, fmt.Sprintf("telegram:%d", owner)),
	}, ",") + `]}`
}

// The case: on a running gateway one exec call writes
// cron/jobs.json by hand; then the gateway restarts. The file is not read:
// jobs live in the data dir, and the stranger gets nothing.
func TestForgedScheduleInTheWorkspaceReachesNoStranger(t *testing.T) {
	s := setup{telegram: "poll_timeout: 1s\nstreaming: false"}
	g := newGW(t, s)
	g.writeConfig(s, "")
	script := fmt.Sprintf("mkdir -p cron && cat > cron/jobs.json <<'EOF'\n%s\nEOF\necho forged", forgedJobs())
	args, err := json.Marshal(map[string]string{"command": script})
	if err != nil {
		t.Fatal(err)
	}
	g.start()
	g.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "exec", Args: string(args)}}},
		fakellm.Reply{Text: "Done."},
	)
	g.tg.PushMessage(telegramfake.DM(owner, "set things up"))
	g.waitLast(owner, "Done.")
	forged := filepath.Join(g.cfg.Agents.Workspace, "cron", "jobs.json")
	if data, err := os.ReadFile(forged); err != nil || !strings.Contains(string(data), "5742a93e") {
		t.Fatalf("the command did not write the forged file (%v):\n%s", err, data)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}

	g.start()
	g.script.Push(fakellm.Reply{Text: "Still here."})
	g.tg.PushMessage(telegramfake.DM(owner, "hello"))
	g.waitLast(owner, "Still here.")
	if jobs, err := g.gateway.cron.All(); err != nil || len(jobs) != 0 {
		t.Errorf("after the forgery and a restart the scheduler holds %v (%v); want none", jobs, err)
	}
	if got := g.tg.Visible(stranger); len(got) > 0 {
		t.Errorf("the stranger got %q", got)
	}
	for _, r := range g.script.Requests() {
		if strings.Contains(r.LastUserText(), "Scheduled job") {
			t.Errorf("a forged job ran a turn: %q", r.LastUserText())
		}
	}
}

// An old version's workspace jobs file (which a command may have forged
// while that version ran) is migrated once at the first start: each entry
// passes the cron tool's checks on the way into the data dir. The
// stranger's job, the too frequent one and the one whose session key is
// another chat's are dropped; the owner's one-time job runs. The workspace
// file is removed (no chat's command reads every chat's jobs there), and
// one written again later is never read.
func TestOldWorkspaceJobsAreMigratedOnceAndChecked(t *testing.T) {
	s := setup{telegram: "poll_timeout: 1s\nstreaming: false"}
	g := newGW(t, s)
	g.writeConfig(s, "")
	g.script.Func = func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "ran " + jobTag.FindString(r.LastUserText())}
	}
	forged := filepath.Join(g.cfg.Agents.Workspace, "cron", "jobs.json")
	if err := os.MkdirAll(filepath.Dir(forged), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(forged, []byte(forgedJobs()), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	g.tg.Wait(t, "the owner's migrated job", func() bool { return slices.Contains(g.tg.Visible(owner), "ran Scheduled job 0badcafe") })
	state, err := os.ReadFile(filepath.Join(g.home, CronJobsFile))
	if err != nil {
		t.Fatalf("no jobs file in the data dir: %v", err)
	}
	for _, dropped := range []string{"5742a93e", "f00dfeed", "0ffkey00"} {
		if strings.Contains(string(state), dropped) {
			t.Errorf("job %s passed into the data dir:\n%s", dropped, state)
		}
	}
	if _, err := os.Lstat(forged); !os.IsNotExist(err) {
		t.Errorf("the workspace jobs file is still there (%v): a chat's command could read every chat's jobs", err)
	}
	for _, r := range g.script.Requests() {
		if text := r.LastUserText(); strings.Contains(text, "5742a93e") || strings.Contains(text, "f00dfeed") || strings.Contains(text, "0ffkey00") {
			t.Errorf("a dropped job ran a turn: %q", text)
		}
	}
	if got := g.tg.Visible(stranger); len(got) > 0 {
		t.Errorf("the stranger got %q", got)
	}

	// Written again after the migration: never read, not even at a restart.
	if err := os.WriteFile(forged, []byte(forgedJobs()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	g.start()
	g.waitReady(true)
	if jobs, err := g.gateway.cron.All(); err != nil || len(jobs) != 0 {
		t.Errorf("after a second forgery and a restart the scheduler holds %v (%v); want none", jobs, err)
	}
}
