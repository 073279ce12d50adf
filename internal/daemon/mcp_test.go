package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/mcp"
)

// TestGatewayRunsMCPServers checks the wiring: the gateway connects the
// configured MCP servers, their tools reach the agent's registry and
// /status, and shutdown closes them and removes the tools.
func TestGatewayRunsMCPServers(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := "agents:\n  workspace: ws\nproviders:\n  openai:\n    api_key: sk-test-0123456789\n" +
		"gateway:\n  listen: 127.0.0.1:0\n  shutdown_grace: 1s\n" +
		"tools:\n  mcp_servers:\n    remote:\n      url: " + srv.URL + "\n    off:\n      command: never-run\n      disabled: true\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := NewGateway(cfg, Options{Version: "test", DataDir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()

	deadline := time.Now().Add(15 * time.Second)
	for !g.core.Tools.Has("mcp_remote_ping") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("mcp_remote_ping never registered; MCP status: %v", g.core.MCP.StatusLines())
		}
		time.Sleep(5 * time.Millisecond)
	}
	lines := strings.Join(g.core.MCP.StatusLines(), "\n")
	for _, want := range []string{"MCP off (stdio): disabled", "MCP remote (http): connected, 1 tool"} {
		if !strings.Contains(lines, want) {
			t.Errorf("status lines lack %q:\n%s", want, lines)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop")
	}
	if g.core.Tools.Has("mcp_remote_ping") {
		t.Error("MCP tools still registered after shutdown")
	}
	if st := g.core.MCP.Status(); st[1].State != mcp.StateStopped {
		t.Errorf("remote after shutdown: %+v", st[1])
	}
}
