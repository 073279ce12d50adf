package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// The floor is only worth its figures if it does a turn's whole physical
// work: this runs it against the fakes over real HTTP and checks each part.
func TestFloorDoesATurnsWork(t *testing.T) {
	tg := telegramfake.New(t)
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: "first answer"}, fakellm.Reply{Text: "second answer"})
	llm := openaifake.New(t, script)

	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	_ = ln.Close()
	cfg, err := yaml.Marshal(map[string]any{
		"agents":    map[string]any{"workspace": ws, "model": "openai/gpt-4o-mini"},
		"providers": map[string]any{"openai": map[string]any{"api_key": openaifake.DefaultAPIKey, "base_url": llm.URL()}},
		"channels": map[string]any{"telegram": map[string]any{
			"enabled": true, "token": telegramfake.Token, "api_url": tg.URL(), "allow_from": []string{"*"}}},
		"gateway": map[string]any{"listen": listen},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", cfgPath, "gateway"}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("run: %v", err)
		}
	}()

	const user = 4242
	tg.PushMessage(telegramfake.DM(user, "hello floor"))
	tg.Wait(t, "the first answer", func() bool { return len(tg.Sent(user)) == 1 })
	tg.PushMessage(telegramfake.DM(user, "and again"))
	tg.Wait(t, "the second answer", func() bool { return len(tg.Sent(user)) == 2 })

	for i, want := range []string{"first answer", "second answer"} {
		if got := tg.Sent(user)[i].Text; got != want {
			t.Errorf("sent[%d] = %q, want %q", i, got, want)
		}
	}
	reqs := script.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	// The request holds what nanobot's holds: the system prompt built from
	// the workspace, every default tool, the history, the new message
	// with its header.
	second := reqs[1]
	if !strings.Contains(second.System, "This file describes who you are") {
		t.Errorf("system prompt lacks SOUL.md: %.200q", second.System)
	}
	wantTools := []string{"cron", "edit_file", "exec", "list_dir", "message", "read_file", "spawn", "web_fetch", "web_search", "write_file"}
	if !slices.Equal(second.Tools, wantTools) {
		t.Errorf("tools = %v, want %v", second.Tools, wantTools)
	}
	var roles []string
	for _, m := range second.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "user"}) {
		t.Fatalf("roles = %v, want user, assistant, user", roles)
	}
	if m := second.Messages[2].Text; !strings.HasPrefix(m, "[") || !strings.Contains(m, "· telegram · chat 4242") || !strings.HasSuffix(m, "]\nand again") {
		t.Errorf("user message = %q, want the header then the text", m)
	}
	if second.Messages[1].Text != "first answer" || !second.Stream || second.MaxTokens != 8192 {
		t.Errorf("history or options lost: %+v", second)
	}

	// Durable before the reply: the session holds both exchanges, the
	// journal both updates.
	if n := lines(t, filepath.Join(ws, "floor", "sessions", "4242.jsonl")); n != 4 {
		t.Errorf("session has %d lines, want 4", n)
	}
	if n := lines(t, filepath.Join(ws, "floor", "updates.jsonl")); n < 2 {
		t.Errorf("journal has %d lines, want at least 2", n)
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}
