package daemon_test

// The gateway with the cron scheduler, the heartbeat, the Telegram channel
// against the fake Bot API and the agent against the fake OpenAI server,
// all wired by NewGateway as in production.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
)

const owner = 100 // allowlisted Telegram user; their DM chat has the same id

func dm(text string) models.Message {
	return models.Message{Chat: models.Chat{ID: owner, Type: models.ChatTypePrivate},
		From: &models.User{ID: owner, FirstName: "Owner", Username: "owner"}, Text: text}
}

// gateway runs a gateway on a fresh workspace until the test ends.
func gateway(t *testing.T, tg *telegramfake.Server, llm *openaifake.Server, prepare func(workspace string)) (workspace string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	prepare(ws)
	cfgPath := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`agents: {workspace: %q, model: openai/gpt-4o-mini}
providers:
  openai: {api_key: %q, base_url: %q, max_retries: 0}
channels:
  telegram: {enabled: true, token: %q, api_url: %q, allow_from: ["%d"], streaming: false, poll_timeout: 1s}
gateway: {listen: "127.0.0.1:0", shutdown_grace: 5s}
`, ws, openaifake.DefaultAPIKey, llm.URL(), telegramfake.Token, tg.URL(), owner)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := daemon.NewGateway(cfg, daemon.Options{Version: "test", DataDir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("gateway did not stop within 20s")
		}
	})
	return ws
}

func TestGatewayDeliversAMissedReminderAndOffersTheNewTools(t *testing.T) {
	script := &fakellm.Script{}
	llm := openaifake.New(t, script)
	tg := telegramfake.New(t)
	script.Push(fakellm.Reply{Text: "Sorry, this is late: call mom!"})

	// A one-time job for the owner's chat fell due while the gateway was down.
	ws := gateway(t, tg, llm, func(ws string) {
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
	})
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
	tg.PushMessage(dm("ask me about the plants every day"))
	tg.Wait(t, "the answer", func() bool { return slices.Contains(tg.Visible(owner), "Every day, then.") })
	if res := script.Requests()[2].Messages; !strings.Contains(lastToolResult(res), "Scheduled job ") {
		t.Errorf("cron tool result: %q", lastToolResult(res))
	}
	// The late job was removed once its run was recorded; the new one is
	// saved for this chat.
	data, err := os.ReadFile(filepath.Join(ws, "cron", "jobs.json"))
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
