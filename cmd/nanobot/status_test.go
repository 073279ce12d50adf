package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
)

func TestStatusListsMCPServers(t *testing.T) {
	cfg := &config.Config{}
	cfg.Agents.Workspace = t.TempDir()
	cfg.Agents.SessionsDir = t.TempDir()
	cfg.Tools.MCPServers = map[string]config.MCPServerConfig{
		"gh":   {Command: "gh-mcp", Args: []string{"--verbose"}, EnabledTools: []string{"search"}},
		"docs": {URL: "https://bot:hunter2-secret@mcp.example.com/mcp"},
		"old":  {Command: "old-mcp", Disabled: true},
	}
	cfg.Gateway.Listen = "127.0.0.1:18790"
	cfg.API.Keys = map[string]string{"webui": "sk-webui-secret-0123456789", "scripts": "sk-scripts-secret-0123456789"}
	var out bytes.Buffer
	if err := printStatus(&out, "config.yaml", cfg); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`MCP docs +configured: http https://bot:\*\*\*@mcp\.example\.com/mcp\n`,
		`MCP gh +configured: stdio gh-mcp --verbose \(tools: search\)\n`,
		`MCP old +disabled\n`,
		`\(MCP servers connect when the gateway runs; /status in a chat shows their state and tools\)`,
		`API +/v1/chat/completions on 127\.0\.0\.1:18790, keys: scripts, webui\n`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hunter2") || strings.Contains(got, "secret-0123") {
		t.Errorf("status shows the URL's password:\n%s", got)
	}
}

// TestConfigFile covers the path every command reads the config from.
func TestConfigFile(t *testing.T) {
	tests := []struct {
		name, flag, want string
	}{
		{"flag or environment", "/etc/nanobot.yaml", "/etc/nanobot.yaml"},
		{"default", "", config.DefaultPath()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &globalFlags{configPath: tt.flag}
			if got := g.configFile(); got != tt.want {
				t.Errorf("configFile() = %q, want %q", got, tt.want)
			}
			if got, want := dataDir(g), filepath.Dir(tt.want); got != want {
				t.Errorf("dataDir() = %q, want %q", got, want)
			}
		})
	}
}
