package main

import (
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// TestDebugLogsCarryTurnIDsAndNoSecrets runs the real gateway at debug
// level through a turn with a retried model call and a tool call, then
// reads everything it logged: neither the bot token nor the API key may
// appear (in any spelling), and the router's, provider's and tools' lines
// of the turn must name it.
func TestDebugLogsCarryTurnIDsAndNoSecrets(t *testing.T) {
	e := newEnv(t)
	tg := telegramfake.New(t)
	// A workspace path holding the token's secret half reaches the log
	// through a field no component scrubs ("gateway started" names the
	// workspace): only the logger's own redaction stands in the way.
	_, tokenSecret, _ := strings.Cut(telegramfake.Token, ":")
	ws := filepath.Join(e.home, "ws-"+tokenSecret)
	e.script.Push(
		fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded"},
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "list_dir", Args: `{"path":"."}`}}},
		fakellm.Reply{Text: "Your workspace has a few files."},
	)
	p := e.startGateway(append(telegramEnv(tg, 7), "NANOBOT_AGENTS_WORKSPACE="+ws), "--log-level", "debug")
	p.waitReady()
	tg.PushMessage(telegramfake.DM(7, "what is in my workspace?"))
	tg.Wait(t, "the answer", func() bool { return len(tg.Visible(7)) == 1 })
	waitUntil(t, "the turn's end in the log", 10*time.Second, func() bool {
		_, ok := p.logLine("turn done")
		return ok
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	logs := p.stderr.String()
	for _, secret := range []string{
		telegramfake.Token, tokenSecret, url.PathEscape(telegramfake.Token), url.QueryEscape(telegramfake.Token),
		openaifake.DefaultAPIKey, strings.TrimPrefix(openaifake.DefaultAPIKey, "sk-"),
	} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains the secret %q", secret)
		}
	}

	if started, _ := p.logLine("gateway started"); started["workspace"] != filepath.Join(e.home, "ws-[REDACTED]") {
		t.Errorf("gateway started names the workspace %v, want the secret in it redacted", started["workspace"])
	}

	done, _ := p.logLine("turn done")
	turn, _ := done["turn"].(string)
	if turn == "" || done["outcome"] != "answered" {
		t.Fatalf("turn done line = %v", done)
	}
	var debug int
	seen := map[string]bool{}
	for _, l := range p.logLines() {
		if l["level"] == "debug" {
			debug++
		}
		logger, _ := l["logger"].(string)
		msg, _ := l["msg"].(string)
		key := logger + ": " + msg
		switch key {
		case "router: model call failed, retrying", "provider: chat completion", "tools: tool call":
			seen[key] = true
			if l["turn"] != turn {
				t.Errorf("%q has turn %v, want %s (the turn it belongs to)", key, l["turn"], turn)
			}
		}
	}
	if debug == 0 {
		t.Error("no debug lines: --log-level debug was not applied")
	}
	for _, key := range []string{"router: model call failed, retrying", "provider: chat completion", "tools: tool call"} {
		if !seen[key] {
			t.Errorf("no %q line in the log", key)
		}
	}
}
