package daemon

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// observe makes g log to the test and to the returned observer too.
func (g *gw) observe() *observer.ObservedLogs {
	core, logs := observer.New(zapcore.InfoLevel)
	g.log = zap.New(zapcore.NewTee(zaptest.NewLogger(g.t).Core(), core))
	return logs
}

// fieldStrings returns a string or []string field of an observed entry.
func fieldStrings(e observer.LoggedEntry, key string) []string {
	v, ok := e.ContextMap()[key]
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	case []string:
		return v
	}
	return []string{fmt.Sprint(v)}
}

// The start-up line names every surface: the chat channels and the HTTP
// listener with each route (the webhook included); with channels there is
// no warning.
func TestStartLineNamesEverySurface(t *testing.T) {
	s := setup{discord: true, telegram: "mode: webhook\nwebhook_url: https://bot.example.com/tg-hook\nwebhook_secret: s3cret-hook"}
	g := newGW(t, s)
	logs := g.observe()
	g.writeConfig(s, "")
	g.start()
	g.waitUntil("the start-up line", func() bool { return logs.FilterMessage("gateway started").Len() == 1 })

	line := logs.FilterMessage("gateway started").All()[0]
	if got := strings.Join(fieldStrings(line, "channels"), ","); got != "telegram,discord,web" {
		t.Errorf("channels = %q, want telegram,discord,web", got)
	}
	if got := fieldStrings(line, "listen"); len(got) != 1 || "http://"+got[0] != g.base {
		t.Errorf("listen = %v, want the listener %s", got, g.base)
	}
	http := strings.Join(fieldStrings(line, "http"), "; ")
	for _, want := range []string{"GET /healthz (liveness)", "GET /readyz (readiness)", "GET /metrics (Prometheus)", "POST /tg-hook (telegram webhook)",
		"/ (web chat and control panel)", "/v1/ (OpenAI-compatible API, no keys: every request refused)"} {
		if !strings.Contains(http, want) {
			t.Errorf("http = %q, lacks %q", http, want)
		}
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("no chat channel").Len(); n != 0 {
		t.Errorf("warned about no chat channel with two enabled")
	}
}

// No chat channel enabled: the gateway still starts (listener, cron, MCP),
// but says loudly that nobody can talk to it and how to fix that.
func TestNoChatChannelWarns(t *testing.T) {
	s := setup{noTelegram: true, noWeb: true}
	g := newGW(t, s)
	logs := g.observe()
	g.writeConfig(s, "")
	g.start()
	g.waitUntil("the warning", func() bool {
		return logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("no chat channel is enabled").Len() == 1
	})
	warn := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("no chat channel is enabled").All()[0]
	for _, want := range []string{"channels.telegram", "channels.discord", "channels.web", "nanobot agent"} {
		if !strings.Contains(warn.Message, want) {
			t.Errorf("warning %q does not mention %s", warn.Message, want)
		}
	}
	if got := strings.Join(fieldStrings(warn, "http"), "; "); !strings.Contains(got, "GET /readyz") {
		t.Errorf("warning's http = %q, want what the listener still serves", got)
	}
	line := logs.FilterMessage("gateway started").All()[0]
	if got := fieldStrings(line, "channels"); len(got) != 0 {
		t.Errorf("channels = %v, want none", got)
	}
	// It serves: /readyz answers, with only the model checks.
	if r := g.waitReady(true); checkNames(r) != "provider openai,model" {
		t.Errorf("checks = %s, want only the provider's and the model's", checkNames(r))
	}
}
