package daemon

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

const apiToken = "sk-e2e-0123456789abcdef"

// TestAPIToolTurnThroughTheGateway runs a tool-using turn through the
// OpenAI-compatible API of the real gateway (OpenAI adapter, fake model over
// HTTP) and checks what the session file holds.
func TestAPIToolTurnThroughTheGateway(t *testing.T) {
	g := startGateway(t, false, "api:\n  keys: {e2e: \""+apiToken+"\"}\n")
	if err := os.WriteFile(filepath.Join(g.cfg.Agents.Workspace, "notes.md"), []byte("buy milk"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.script.Push(
		fakellm.Reply{Text: "Checking.", ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path":"notes.md"}`}}},
		fakellm.Reply{Text: "Your note says: buy milk."},
	)
	cfg := openai.DefaultConfig(apiToken)
	cfg.BaseURL = g.base + "/v1"
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: tr}
	client := openai.NewClientWithConfig(cfg)

	stream, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", Stream: true, User: "alice",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "what do my notes say?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var content strings.Builder
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	_ = stream.Close()
	if got := content.String(); got != "Checking.\n\nYour note says: buy milk." {
		t.Errorf("streamed = %q", got)
	}

	msgs := g.sessionMessages("api:e2e:alice")
	if roles(msgs) != "user,assistant,tool,assistant" {
		t.Fatalf("session roles = %s", roles(msgs))
	}
	if !strings.Contains(msgs[0].Text(), "what do my notes say?") || msgs[1].ToolCalls()[0].Name != "read_file" ||
		!strings.Contains(msgs[2].ToolResults()[0].Content.Live, "buy milk") || msgs[3].Text() != "Your note says: buy milk." {
		t.Errorf("session = %+v", msgs)
	}
	files, _ := filepath.Glob(filepath.Join(g.cfg.Agents.SessionsDir, "api*"))
	if len(files) != 1 {
		t.Errorf("session files = %v", files)
	}
	// Counted once the handler knows how the request ended, which is after
	// the last byte the client read: looked for until it shows.
	g.waitUntil("/metrics to count the request by key name", func() bool {
		_, body := g.get("/metrics")
		return strings.Contains(body, `nanobot_api_requests_total{key="e2e",outcome="ok"} 1`)
	})
	if _, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "nanobot",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("one-off turn: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(g.cfg.Agents.SessionsDir, "api*")); len(files) != 1 {
		t.Errorf("a one-off turn left a session file: %v", files)
	}
}

// TestAPIImageCannotRewriteTheConfig replays issue 28's attack on the real
// gateway: an inline image whose declared type climbs from inbox/ to the
// gateway's own config.yaml (home/workspace/inbox/… → home/config.yaml).
// Its bytes are a picture, so the request is answered; the config keeps
// its bytes and the picture lands in inbox/ under the daemon's name.
func TestAPIImageCannotRewriteTheConfig(t *testing.T) {
	g := startGateway(t, false, "api:\n  keys: {e2e: \""+apiToken+"\"}\n")
	before, err := os.ReadFile(g.configPath())
	if err != nil {
		t.Fatal(err)
	}
	g.script.Push(fakellm.Reply{Text: "A picture."})
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + "\nmcp: {servers: {x: {command: /bin/sh}}}\n"
	url := "data:image//../../../config.yaml;base64," + base64.StdEncoding.EncodeToString([]byte(png))
	body := `{"model":"nanobot","user":"alice","messages":[{"role":"user","content":[{"type":"text","text":"look"},` +
		`{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, answer)
	}
	if after, _ := os.ReadFile(g.configPath()); string(after) != string(before) {
		t.Fatalf("the gateway's config.yaml was rewritten:\n%s", after)
	}
	entries, _ := os.ReadDir(filepath.Join(g.cfg.Agents.Workspace, "inbox"))
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "img-") || !strings.HasSuffix(entries[0].Name(), ".png") {
		t.Errorf("inbox holds %v; want one daemon-named picture", entries)
	}
}
