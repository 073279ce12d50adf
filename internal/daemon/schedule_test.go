package daemon

// The gateway with the cron scheduler, the Telegram channel
// against the fake Bot API and the agent against the fake OpenAI server,
// all wired by NewGateway as in production.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

func TestGatewayDeliversAMissedReminderAndOffersTheNewTools(t *testing.T) {
	s := setup{telegram: "poll_timeout: 1s\nstreaming: false"}
	g := newGW(t, s)
	g.writeConfig(s, "")
	tg, script, ws := g.tg, g.script, g.cfg.Agents.Workspace
	script.Push(fakellm.Reply{Text: "Sorry, this is late: call mom!"})

	// A one-time job for the owner's chat fell due while an old version
	// (jobs in the workspace) was down: migrated at start, it runs.
	jobs := fmt.Sprintf(`{"version": 1, "jobs": [{"id": "0badcafe", "message": "Remind the user to call mom.",
  "schedule": {"kind": "at", "at": "2025-01-01T12:00:00Z"},
  "chat": {"channel": "telegram", "chat_id": "%d", "sender_id": "%d", "session_key": "telegram:%d", "metadata": {"chat_type": "private"}},
  "created_at": "2025-01-01T11:00:00Z", "next_run": "2025-01-01T12:00:00Z"}]}`, owner, owner, owner)
	if err := os.MkdirAll(filepath.Join(ws, "cron"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "cron", "jobs.json"), []byte(jobs), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	tg.Wait(t, "the late reminder", func() bool { return slices.Contains(tg.Visible(owner), "Sorry, this is late: call mom!") })
	first := script.Requests()[0]
	if prompt := first.LastUserText(); !strings.Contains(prompt, "Scheduled job 0badcafe") || !strings.Contains(prompt, "LATE") {
		t.Errorf("the run's user turn:\n%s", prompt)
	}
	for _, tool := range []string{"cron", "web_fetch", "web_search"} {
		if !slices.Contains(first.Tools, tool) {
			t.Errorf("the model is not offered %s; tools: %v", tool, first.Tools)
		}
	}

	// The owner asks for a new reminder in the same chat.
	script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "cron", Args: `{"action":"add","every":"24h","message":"Ask about the plants."}`}}},
		fakellm.Reply{Text: "Every day, then."},
	)
	tg.PushMessage(telegramfake.DM(owner, "ask me about the plants every day"))
	tg.Wait(t, "the answer", func() bool { return slices.Contains(tg.Visible(owner), "Every day, then.") })
	if res := script.Requests()[2].Messages; !strings.Contains(lastToolResult(res), "Scheduled job ") {
		t.Errorf("cron tool result: %q", lastToolResult(res))
	}
	// The late job was removed once its run was recorded; the new one is
	// saved for this chat.
	data, err := os.ReadFile(filepath.Join(g.home, CronJobsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"every": "24h0m0s"`, `"chat_id": "100"`, `"session_key": "telegram:100"`, `"chat_type": "private"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("jobs.json lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "0badcafe") {
		t.Errorf("the delivered one-time job is still saved:\n%s", data)
	}
}

func lastToolResult(msgs []fakellm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if len(msgs[i].ToolResults) > 0 {
			return msgs[i].ToolResults[0].Content
		}
	}
	return ""
}
