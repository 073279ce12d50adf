package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// BenchmarkToolCall measures one echo call through the registry, the MCP
// client and the transport to the test server and back.
func BenchmarkToolCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  func(b *testing.B) config.MCPServerConfig
	}{
		{"http", func(b *testing.B) config.MCPServerConfig {
			srv := newHTTPServer(b)
			return config.MCPServerConfig{URL: srv.URL, ToolTimeout: 10 * time.Second}
		}},
		{"stdio", func(*testing.B) config.MCPServerConfig { return stdioServer("stdio") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reg := tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), zap.NewNop())
			mgr := NewManager(map[string]config.MCPServerConfig{"srv": tc.cfg(b)}, reg, Options{}, zap.NewNop())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- mgr.Run(ctx) }()
			b.Cleanup(func() { cancel(); _ = <-done }) // how Run ends is not what this measures
			deadline := time.Now().Add(15 * time.Second)
			for !reg.Has("mcp_srv_echo") {
				if time.Now().After(deadline) {
					b.Fatal("server did not connect")
				}
				time.Sleep(time.Millisecond)
			}
			call := llm.ToolCall{ID: "c", Name: "mcp_srv_echo", Arguments: json.RawMessage(`{"text":"hi"}`)}
			b.ResetTimer()
			for b.Loop() {
				if res := reg.Execute(ctx, call, tools.Origin{}); res.IsError {
					b.Fatal(res.Content.Live)
				}
			}
		})
	}
}
