package mcp

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
)

func TestProbeConnectsListsAndLetsGo(t *testing.T) {
	h := newHTTPServer(t)
	limited := stdioServer("stdio")
	limited.EnabledTools = []string{"echo", "add"}
	tests := []struct {
		name      string
		cfg       config.MCPServerConfig
		wantTool  string // one name that must be listed
		wantCount int    // 0: any
		wantErr   string
		// timeout is the connect timeout: one that must pass is the
		// only short one; the others start a race-built child, which a
		// loaded machine may take seconds to do [1m].
		timeout time.Duration
	}{
		{name: "stdio", cfg: stdioServer("stdio"), wantTool: "mcp_probe_echo"},
		{name: "http", cfg: config.MCPServerConfig{URL: h.URL}, wantTool: "mcp_probe_add"},
		{name: "enabled_tools applies", cfg: limited, wantTool: "mcp_probe_add", wantCount: 2},
		{name: "a server that dies at start", cfg: stdioServer("broken"), wantErr: "cannot open database"},
		{name: "a server that never answers", cfg: stdioServer("mute"), wantErr: "connect", timeout: time.Second},
		{name: "nothing listening", cfg: config.MCPServerConfig{URL: "http://127.0.0.1:1/mcp"}, wantErr: "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{ConnectTimeout: cmp.Or(tt.timeout, time.Minute), StopGrace: 200 * time.Millisecond, Workspace: t.TempDir()}
			names, _, err := Probe(context.Background(), "probe", tt.cfg, opts, zaptest.NewLogger(t))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(names, tt.wantTool) {
				t.Errorf("tools %v lack %s", names, tt.wantTool)
			}
			if tt.wantCount > 0 && len(names) != tt.wantCount {
				t.Errorf("%d tools %v, want %d", len(names), names, tt.wantCount)
			}
		})
	}
}
