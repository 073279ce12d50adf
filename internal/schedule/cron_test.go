package schedule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/tools"
)

var chat42 = Chat{Channel: "telegram", ChatID: "42", SenderID: "7", SessionKey: "telegram:42",
	Metadata: map[string]string{"chat_type": "private"}}

type cronFixture struct {
	t     *testing.T
	path  string
	clock *clock.Fake
	inbox *inbox
}

func newCronFixture(t *testing.T) *cronFixture {
	return &cronFixture{t: t, path: filepath.Join(t.TempDir(), "cron", "jobs.json"), clock: clock.NewFake(), inbox: newInbox()}
}

// cron returns a new scheduler on the fixture's file, as after a restart.
func (f *cronFixture) cron() *Cron {
	return NewCron(CronConfig{Path: f.path}, CronDeps{Bus: f.inbox, Clock: f.clock}, zaptest.NewLogger(f.t))
}

func (f *cronFixture) fileJobs() []map[string]any {
	f.t.Helper()
	data, err := os.ReadFile(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	var file struct {
		Version int              `json:"version"`
		Jobs    []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		f.t.Fatalf("jobs.json is not JSON: %v\n%s", err, data)
	}
	if file.Version != 1 {
		f.t.Errorf("version = %d, want 1", file.Version)
	}
	return file.Jobs
}

func mustAdd(t *testing.T, c *Cron, chat Chat, w When, msg string) Job {
	t.Helper()
	j, err := c.Add(chat, w, msg)
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	return j
}

func TestOneShotFiresOnTimeInItsChatAndIsRemovedOnceRecorded(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	start(t, c)
	j := mustAdd(t, c, chat42, When{At: "in 20m"}, "Remind the user to call mom")

	waitArmed(t, f.clock, 20*time.Minute)
	f.clock.Advance(20*time.Minute - time.Second)
	if got := f.inbox.all(); len(got) != 0 {
		t.Fatalf("published %d messages before the job was due", len(got))
	}
	f.clock.Advance(time.Second)
	m := f.inbox.wait(t, 1)[0]

	if m.Channel != "telegram" || m.ChatID != "42" || m.SessionKey != "telegram:42" || m.SenderID != "7" {
		t.Errorf("delivered to %s:%s (session %s, sender %s), want telegram:42", m.Channel, m.ChatID, m.SessionKey, m.SenderID)
	}
	wantMeta := map[string]string{"chat_type": "private", MetaSource: SourceCron, MetaJobID: j.ID}
	for k, v := range wantMeta {
		if m.Metadata[k] != v {
			t.Errorf("metadata[%s] = %q, want %q (all: %v)", k, m.Metadata[k], v, m.Metadata)
		}
	}
	for _, want := range []string{"Scheduled job " + j.ID, "Remind the user to call mom", "one-time job"} {
		if !strings.Contains(m.Content, want) {
			t.Errorf("content lacks %q:\n%s", want, m.Content)
		}
	}
	if strings.Contains(m.Content, "LATE") {
		t.Errorf("an on-time run is flagged late:\n%s", m.Content)
	}
	if strings.HasPrefix(m.Content, "/") {
		t.Errorf("content could be taken for a command: %q", m.Content)
	}
	// Until the agent records the run, the job stays in the file.
	if n := len(f.fileJobs()); n != 1 {
		t.Fatalf("jobs in file before the run was recorded = %d, want 1", n)
	}
	m.Ack()
	if n := len(f.fileJobs()); n != 0 {
		t.Errorf("jobs in file after the run was recorded = %d, want 0", n)
	}
	if got, _ := c.Jobs("telegram:42"); len(got) != 0 {
		t.Errorf("jobs left: %+v", got)
	}
}

func TestJobSurvivesRestart(t *testing.T) {
	f := newCronFixture(t)
	first := f.cron()
	stop := start(t, first)
	j := mustAdd(t, first, chat42, When{At: "in 20m"}, "stretch")
	waitArmed(t, f.clock, 20*time.Minute)
	stop()

	second := f.cron()
	jobs, err := second.Jobs("telegram:42")
	if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID || !jobs[0].NextRun.Equal(j.NextRun) {
		t.Fatalf("after restart: jobs %+v, err %v; want job %s", jobs, err, j.ID)
	}
	start(t, second)
	waitArmed(t, f.clock, 20*time.Minute)
	f.clock.Advance(20 * time.Minute)
	m := f.inbox.wait(t, 1)[0]
	if m.Metadata[MetaJobID] != j.ID || strings.Contains(m.Content, "LATE") {
		t.Errorf("after restart the job fired as %+v", m)
	}
}

func TestMissedOneShotFiresOnceOnStartFlaggedLate(t *testing.T) {
	f := newCronFixture(t)
	first := f.cron()
	j := mustAdd(t, first, chat42, When{At: "in 20m"}, "take the cake out")
	// The daemon is down while the job is due.
	f.clock.Advance(2*time.Hour + 20*time.Minute)

	second := f.cron()
	stop := start(t, second)
	m := f.inbox.wait(t, 1)[0]
	for _, want := range []string{"LATE", "due at Wed 2025-01-01 12:20 UTC, 2h ago", "take the cake out"} {
		if !strings.Contains(m.Content, want) {
			t.Errorf("late run lacks %q:\n%s", want, m.Content)
		}
	}
	// Nothing else is due, so the scheduler sleeps without a timer and
	// publishes nothing more.
	eventually(t, "the scheduler is idle", func() bool { return f.clock.Pending() == 0 })
	if n := len(f.inbox.all()); n != 1 {
		t.Fatalf("published %d messages, want 1", n)
	}

	// Stopped before the agent recorded the run: it comes again after the
	// next start (at least once), still late.
	stop()
	third := f.cron()
	start(t, third)
	again := f.inbox.wait(t, 2)[1]
	if again.Metadata[MetaJobID] != j.ID || !strings.Contains(again.Content, "LATE") {
		t.Errorf("unrecorded run was not repeated late: %+v", again)
	}
	again.Ack()
	if n := len(f.fileJobs()); n != 0 {
		t.Errorf("jobs in file after the run was recorded = %d, want 0", n)
	}
}

func TestRecurringJobMissedRunsFireOnceNotInABurst(t *testing.T) {
	f := newCronFixture(t)
	first := f.cron()
	j := mustAdd(t, first, chat42, When{Every: "10m"}, "drink water") // due 12:10, 12:20, ...
	f.clock.Advance(65 * time.Minute)                                 // down until 13:05: six runs missed

	second := f.cron()
	start(t, second)
	m := f.inbox.wait(t, 1)[0]
	if !strings.Contains(m.Content, "LATE") || !strings.Contains(m.Content, "runs again at Wed 2025-01-01 13:10 UTC") {
		t.Errorf("catch-up run:\n%s", m.Content)
	}
	waitArmed(t, f.clock, 5*time.Minute) // next 13:10: the missed ones are skipped
	if n := len(f.inbox.all()); n != 1 {
		t.Fatalf("published %d messages for the missed runs, want 1", n)
	}
	jobs, _ := second.Jobs("telegram:42")
	if len(jobs) != 1 || jobs[0].Runs != 1 || !jobs[0].NextRun.Equal(time.Date(2025, 1, 1, 13, 10, 0, 0, time.UTC)) {
		t.Fatalf("job after catch-up: %+v", jobs)
	}

	f.clock.Advance(5 * time.Minute)
	next := f.inbox.wait(t, 2)[1]
	if next.Metadata[MetaJobID] != j.ID || strings.Contains(next.Content, "LATE") {
		t.Errorf("on-time run: %+v", next)
	}
	waitArmed(t, f.clock, 10*time.Minute)
	if saved := f.fileJobs(); len(saved) != 1 || saved[0]["next_run"] != "2025-01-01T13:20:00Z" || saved[0]["runs"] != 2.0 {
		t.Errorf("saved job = %v", saved)
	}
}

func TestCronExpressionJobRunsInItsTimeZone(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	start(t, c)
	// 12:00 UTC is 13:00 in Berlin; the next 14:30 Berlin is 13:30 UTC.
	mustAdd(t, c, chat42, When{Cron: "30 14 * * *", TZ: "Europe/Berlin"}, "standup")
	waitArmed(t, f.clock, 90*time.Minute)
	f.clock.Advance(90 * time.Minute)
	m := f.inbox.wait(t, 1)[0]
	if !strings.Contains(m.Content, `cron "30 14 * * *" (Europe/Berlin)`) || !strings.Contains(m.Content, "runs again at Thu 2025-01-02 14:30 CET") {
		t.Errorf("content:\n%s", m.Content)
	}
	waitArmed(t, f.clock, 24*time.Hour)
}

func TestAddWakesTheSchedulerForAnEarlierJob(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	start(t, c)
	mustAdd(t, c, chat42, When{At: "in 3h"}, "later")
	waitArmed(t, f.clock, 3*time.Hour)
	early := mustAdd(t, c, chat42, When{At: "in 5m"}, "sooner")
	waitArmed(t, f.clock, 5*time.Minute)
	f.clock.Advance(5 * time.Minute)
	if m := f.inbox.wait(t, 1)[0]; m.Metadata[MetaJobID] != early.ID {
		t.Errorf("fired %s, want the earlier job %s", m.Metadata[MetaJobID], early.ID)
	}
}

func TestJobsFileIsPrivateAndComplete(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	j := mustAdd(t, c, chat42, When{Cron: "0 9 * * 1-5", TZ: "Asia/Tokyo"}, "morning brief")
	for path, want := range map[string]os.FileMode{f.path: 0o600, filepath.Dir(f.path): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode = %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(f.path))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// The lock file stays: removing it would let two processes lock
	// different files of one name.
	if want := []string{".jobs.json.lock", "jobs.json"}; !slices.Equal(names, want) {
		t.Errorf("cron dir holds %v, want %v (temp files left?)", names, want)
	}
	saved := f.fileJobs()
	if len(saved) != 1 {
		t.Fatalf("saved %d jobs", len(saved))
	}
	got, _ := json.Marshal(saved[0])
	for _, want := range []string{`"id":"` + j.ID + `"`, `"message":"morning brief"`, `"kind":"cron"`, `"expr":"0 9 * * 1-5"`,
		`"tz":"Asia/Tokyo"`, `"channel":"telegram"`, `"chat_id":"42"`, `"session_key":"telegram:42"`, `"next_run":"2025-01-02T00:00:00Z"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("saved job lacks %s: %s", want, got)
		}
	}
}

func TestCorruptJobsFileIsMovedAsideNotLost(t *testing.T) {
	f := newCronFixture(t)
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path, []byte(`{"version":1,"jobs":[{"id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := f.cron()
	if jobs, err := c.Jobs("telegram:42"); err != nil || len(jobs) != 0 {
		t.Fatalf("Jobs = %v, %v; want none and no error", jobs, err)
	}
	aside, _ := filepath.Glob(f.path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved-aside files: %v", aside)
	}
	if data, _ := os.ReadFile(aside[0]); string(data) != `{"version":1,"jobs":[{"id":` {
		t.Errorf("moved-aside content = %q", data)
	}
	mustAdd(t, c, chat42, When{At: "in 1h"}, "new")
	if n := len(f.fileJobs()); n != 1 {
		t.Errorf("jobs after add = %d", n)
	}
}

func TestUnusableEntriesAreKeptVerbatim(t *testing.T) {
	f := newCronFixture(t)
	good := `{"id":"aaaa0001","message":"ok","schedule":{"kind":"every","every":"1h0m0s"},` +
		`"chat":{"channel":"telegram","chat_id":"42","session_key":"telegram:42"},"created_at":"2025-01-01T11:00:00Z","next_run":"2025-01-01T13:00:00Z"}`
	bad := `{"id":"bbbb0002","message":"bad zone","schedule":{"kind":"cron","expr":"0 9 * * *","tz":"Mars/Base"},` +
		`"chat":{"channel":"telegram","chat_id":"42"},"created_at":"2025-01-01T11:00:00Z","next_run":"2025-01-02T09:00:00Z"}`
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path, []byte(`{"version":1,"jobs":[`+good+`,`+bad+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := f.cron()
	jobs, err := c.Jobs("telegram:42")
	if err != nil || len(jobs) != 1 || jobs[0].ID != "aaaa0001" {
		t.Fatalf("Jobs = %+v, %v; want only the usable job", jobs, err)
	}
	mustAdd(t, c, chat42, When{At: "in 2h"}, "another")
	data, _ := os.ReadFile(f.path)
	if !strings.Contains(string(data), `"tz": "Mars/Base"`) || !strings.Contains(string(data), `"id": "bbbb0002"`) {
		t.Errorf("the unusable entry was dropped:\n%s", data)
	}
}

func TestNewerFileFormatStopsTheScheduler(t *testing.T) {
	f := newCronFixture(t)
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path, []byte(`{"version":2,"jobs":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := f.cron().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "format version 2 is newer") {
		t.Fatalf("Run = %v", err)
	}
}

func TestJobsAreScopedToTheirChat(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	other := Chat{Channel: "discord", ChatID: "99", SessionKey: "discord:99"}
	mine := mustAdd(t, c, chat42, When{Every: "1h"}, "mine")
	theirs := mustAdd(t, c, other, When{Every: "2h"}, "theirs")

	if jobs, _ := c.Jobs("telegram:42"); len(jobs) != 1 || jobs[0].ID != mine.ID {
		t.Errorf("telegram:42 sees %+v", jobs)
	}
	if _, err := c.Remove("telegram:42", theirs.ID); err == nil || !strings.Contains(err.Error(), "its jobs are: "+mine.ID) {
		t.Errorf("removing another chat's job: %v", err)
	}
	if _, err := c.Remove("telegram:42", mine.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Remove("telegram:42", mine.ID); err == nil || !strings.Contains(err.Error(), "it has no jobs") {
		t.Errorf("second remove: %v", err)
	}
	if saved := f.fileJobs(); len(saved) != 1 || saved[0]["id"] != theirs.ID {
		t.Errorf("file after remove: %v", saved)
	}
}

func TestPerChatLimit(t *testing.T) {
	f := newCronFixture(t)
	c := NewCron(CronConfig{Path: f.path, MaxJobsPerChat: 2}, CronDeps{Bus: f.inbox, Clock: f.clock}, zaptest.NewLogger(t))
	mustAdd(t, c, chat42, When{Every: "1h"}, "a")
	mustAdd(t, c, chat42, When{Every: "1h"}, "b")
	if _, err := c.Add(chat42, When{Every: "1h"}, "c"); err == nil || !strings.Contains(err.Error(), "already has 2 jobs") {
		t.Errorf("third job: %v", err)
	}
	if _, err := c.Add(Chat{Channel: "discord", ChatID: "1"}, When{Every: "1h"}, "elsewhere"); err != nil {
		t.Errorf("another chat is not limited by this one: %v", err)
	}
}

func invoke(t *testing.T, tool tools.Tool, origin tools.Origin, args string) tools.Result {
	t.Helper()
	res, err := tool.Run(context.Background(), tools.Invocation{CallID: "c1", Args: json.RawMessage(args), Origin: origin})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestCronTool(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	tool := c.Tool(func(ch string) bool { return ch == "telegram" || ch == "discord" })
	user := tools.Origin{Channel: "telegram", ChatID: "42", SenderID: "7", SessionKey: "telegram:42",
		Metadata: map[string]string{"chat_type": "private"}}
	cronTurn := user
	cronTurn.Metadata = map[string]string{MetaSource: SourceCron, MetaJobID: "x"}
	heartbeatTurn := user
	heartbeatTurn.Metadata = map[string]string{MetaSource: SourceHeartbeat}

	added := invoke(t, tool, user, `{"action":"add","at":"in 20m","message":"call mom"}`)
	if added.IsError || !strings.HasPrefix(added.Text, "Scheduled job ") ||
		!strings.Contains(added.Text, "once at Wed 2025-01-01 12:20 UTC. First run Wed 2025-01-01 12:20 UTC (in 20m). Message: \"call mom\"") {
		t.Fatalf("add: %+v", added)
	}
	id := strings.TrimSuffix(strings.Fields(added.Text)[2], ":")

	tests := []struct {
		name    string
		origin  tools.Origin
		args    string
		isError bool
		want    string
	}{
		{"list", user, `{"action":"list"}`, false, "1 job(s) in this chat, soonest first:\n- " + id + ": once at Wed 2025-01-01 12:20 UTC"},
		{"a cron turn cannot add", cronTurn, `{"action":"add","every":"1h","message":"again"}`, true, "scheduled work cannot create jobs"},
		{"a heartbeat turn cannot add", heartbeatTurn, `{"action":"add","every":"1h","message":"again"}`, true, "scheduled work cannot create jobs"},
		{"a cron turn may list", cronTurn, `{"action":"list"}`, false, id},
		{"terminal chats cannot receive runs", tools.Origin{Channel: "cli", ChatID: "local", SessionKey: "cli:local"},
			`{"action":"add","at":"in 5m","message":"x"}`, true, "cannot be delivered to cli chats"},
		{"no chat", tools.Origin{}, `{"action":"list"}`, true, "no current chat"},
		{"bad zone reaches the model", user, `{"action":"add","cron":"0 9 * * *","tz":"CEST","message":"x"}`, true, `unknown time zone "CEST"`},
		{"empty message", user, `{"action":"add","at":"in 5m","message":"  "}`, true, `"message" is empty`},
		{"unknown action", user, `{"action":"pause"}`, true, `unknown action "pause"`},
		{"remove unknown", user, `{"action":"remove","id":"nope"}`, true, `there is no job "nope" in this chat; its jobs are: ` + id},
		{"another chat sees nothing", tools.Origin{Channel: "telegram", ChatID: "43"}, `{"action":"list"}`, false, "This chat has no scheduled jobs."},
		{"remove", user, `{"action":"remove","id":"` + id + `"}`, false, "Removed job " + id + ` (once at Wed 2025-01-01 12:20 UTC): "call mom"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := invoke(t, tool, tc.origin, tc.args)
			if res.IsError != tc.isError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("result = %+v, want is_error=%v and text containing %q", res, tc.isError, tc.want)
			}
		})
	}
	if saved := f.fileJobs(); len(saved) != 0 {
		t.Errorf("jobs left in the file: %v", saved)
	}
}

func TestCronToolSpecIsAValidToolSchema(t *testing.T) {
	reg := tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
	if err := reg.Register(newCronFixture(t).cron().Tool(nil)); err != nil {
		t.Fatal(err)
	}
	if reg.ReadOnly("cron") {
		t.Error("cron changes state and must not be read-only")
	}
}

func TestAllListsEveryChatsJobsSoonestFirst(t *testing.T) {
	f := newCronFixture(t)
	c := f.cron()
	other := Chat{Channel: "discord", ChatID: "9", SessionKey: "discord:9"}
	late := mustAdd(t, c, chat42, When{Every: "2h"}, "late")
	soon := mustAdd(t, c, other, When{Every: "1h"}, "soon")
	all, err := c.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != soon.ID || all[1].ID != late.ID {
		t.Fatalf("All = %+v, want %s then %s", all, soon.ID, late.ID)
	}
}

// A change that cannot lock the jobs file fails and leaves the scheduler
// usable: the lock taken before the file's (lockForChange) is released.
func TestChangesFailCleanlyWhenTheJobsFileCannotBeLocked(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *Cron, id string) error
	}{
		{"add", func(c *Cron, _ string) error { _, err := c.Add(chat42, When{Every: "1h"}, "b"); return err }},
		{"remove", func(c *Cron, id string) error { _, err := c.Remove("telegram:42", id); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCronFixture(t)
			c := f.cron()
			j := mustAdd(t, c, chat42, When{Every: "1h"}, "a")
			// A directory where the lock file goes cannot be opened for writing.
			lock := filepath.Join(filepath.Dir(f.path), ".jobs.json.lock")
			if err := os.Remove(lock); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(lock, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(c, j.ID); err == nil || !strings.Contains(err.Error(), "lock") {
				t.Fatalf("change with the lock file unusable: %v", err)
			}
			if jobs, err := c.Jobs("telegram:42"); err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
				t.Fatalf("after the failed change: %+v, %v", jobs, err)
			}
			if err := os.Remove(lock); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(c, j.ID); err != nil {
				t.Errorf("change once the file can be locked again: %v", err)
			}
		})
	}
}
