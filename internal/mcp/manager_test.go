package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// transports runs a test against the test server, named srv, over both
// transports; tweak adjusts its config.
func transports(t *testing.T, tweak func(*config.MCPServerConfig), test func(t *testing.T, rig *testRig)) {
	t.Run("http", func(t *testing.T) {
		srv := newHTTPServer(t)
		cfg := config.MCPServerConfig{URL: srv.URL, Headers: map[string]string{"X-Api-Key": "k-123"}, ToolTimeout: 10 * time.Second}
		if tweak != nil {
			tweak(&cfg)
		}
		rig := startManager(t, map[string]config.MCPServerConfig{"srv": cfg})
		rig.waitState("srv", StateConnected)
		test(t, rig)
		if got := srv.lastHeader("X-Api-Key"); got != "k-123" {
			t.Errorf("X-Api-Key header = %q, want the configured k-123", got)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		cfg := stdioServer("stdio")
		if tweak != nil {
			tweak(&cfg)
		}
		rig := startManager(t, map[string]config.MCPServerConfig{"srv": cfg})
		rig.waitState("srv", StateConnected)
		test(t, rig)
	})
}

func TestToolResults(t *testing.T) {
	transports(t, nil, func(t *testing.T, rig *testRig) {
		tests := []struct {
			tool      string
			args      any
			want      string
			isError   bool
			images    int
			wantExact bool
		}{
			{tool: "mcp_srv_echo", args: map[string]any{"text": "hi"}, want: "echo: hi", wantExact: true},
			// Structured content that the text already carries is not repeated.
			{tool: "mcp_srv_add", args: map[string]any{"a": 2, "b": "3"}, want: `{"sum":5}`, wantExact: true},
			// Structured content alone becomes JSON text.
			{tool: "mcp_srv_stats", args: map[string]any{}, want: `{"files":3,"ok":true}`, wantExact: true},
			{tool: "mcp_srv_fail", args: map[string]any{}, want: "disk quota exceeded", isError: true, wantExact: true},
			{tool: "mcp_srv_reject", args: map[string]any{}, want: `Error: the MCP server "srv" refused mcp_srv_reject: path must be relative`,
				isError: true, wantExact: true},
			{tool: "mcp_srv_image", args: map[string]any{}, want: "a red dot", images: 1, wantExact: true},
			{tool: "mcp_srv_files_read_v2", args: map[string]any{"path": "a.txt"}, want: `read {"path":"a.txt"}`, wantExact: true},
			// Arguments are checked against the server's schema first.
			{tool: "mcp_srv_echo", args: map[string]any{}, want: `missing required argument "text"`, isError: true},
		}
		for _, tc := range tests {
			res := rig.call(tc.tool, tc.args)
			got := res.Content.Live
			if tc.wantExact && got != tc.want || !strings.Contains(got, tc.want) {
				t.Errorf("%s: text = %q, want %q", tc.tool, got, tc.want)
			}
			if res.IsError != tc.isError {
				t.Errorf("%s: IsError = %v, want %v (text %q)", tc.tool, res.IsError, tc.isError, got)
			}
			if len(res.Images) != tc.images {
				t.Errorf("%s: %d images, want %d", tc.tool, len(res.Images), tc.images)
			}
			for _, img := range res.Images {
				if img.MIME != "image/png" || !bytes.Equal(img.Data, pngPixel) {
					t.Errorf("%s: image %s of %d bytes, want the PNG pixel", tc.tool, img.MIME, len(img.Data))
				}
			}
		}
		if !rig.reg.ReadOnly("mcp_srv_add") || rig.reg.ReadOnly("mcp_srv_echo") {
			t.Error("readOnlyHint is not passed on: add is read-only, echo is not")
		}
	})
}

func TestListChanged(t *testing.T) {
	transports(t, nil, func(t *testing.T, rig *testRig) {
		if rig.reg.Has("mcp_srv_late") {
			t.Fatal("mcp_srv_late registered before the server added it")
		}
		if res := rig.call("mcp_srv_add_late", map[string]any{}); res.IsError {
			t.Fatalf("add_late: %s", res.Content.Live)
		}
		waitFor(t, "mcp_srv_late to be registered", func() bool { return rig.reg.Has("mcp_srv_late") })
		if res := rig.call("mcp_srv_late", map[string]any{}); res.IsError || res.Content.Live != "late tool" {
			t.Errorf("late: %+v", res)
		}
		if st := rig.status("srv"); st.Tools != 17 {
			t.Errorf("status counts %d tools, want 17", st.Tools)
		}
		rig.call("mcp_srv_remove_late", map[string]any{})
		waitFor(t, "mcp_srv_late to be removed", func() bool { return !rig.reg.Has("mcp_srv_late") })
		if res := rig.call("mcp_srv_late", map[string]any{}); !res.IsError || !strings.Contains(res.Content.Live, "unknown tool") {
			t.Errorf("late after removal: %+v", res)
		}
	})
}

func TestToolTimeout(t *testing.T) {
	transports(t, func(c *config.MCPServerConfig) { c.ToolTimeout = 150 * time.Millisecond }, func(t *testing.T, rig *testRig) {
		// block never returns on its own, so only the timeout can end it.
		result := make(chan llm.ToolResult, 1)
		go func() {
			result <- rig.reg.Execute(context.Background(), llm.ToolCall{ID: "b", Name: "mcp_srv_block", Arguments: json.RawMessage(`{}`)}, tools.Origin{})
		}()
		// Once the server runs it, the call's timer is the only one armed
		// (block_stats's own has stopped): let it expire.
		waitFor(t, "the server to start block", func() bool {
			return rig.call("mcp_srv_block_stats", map[string]any{}).Content.Live == "1 started, 0 cancelled"
		})
		rig.clock.Advance(150 * time.Millisecond)
		res := <-result
		want := "Error: mcp_srv_block timed out after 150ms (tools.mcp_servers.srv.tool_timeout)"
		if !res.IsError || !strings.HasPrefix(res.Content.Live, want) {
			t.Errorf("block: %+v, want an error starting %q", res, want)
		}
		// The server was told, and stopped working on it.
		waitFor(t, "the server to see the cancellation", func() bool {
			return rig.call("mcp_srv_block_stats", map[string]any{}).Content.Live == "1 started, 1 cancelled"
		})
		// The connection is fine: the next call works without a reconnect.
		if res := rig.call("mcp_srv_echo", map[string]any{"text": "after"}); res.Content.Live != "echo: after" {
			t.Errorf("echo after a timeout: %+v", res)
		}
		if st := rig.status("srv"); st.State != StateConnected {
			t.Errorf("state after a timeout = %s, want connected", st.State)
		}
	})
}

func TestEnabledTools(t *testing.T) {
	rig := startManager(t, map[string]config.MCPServerConfig{
		"srv": func() config.MCPServerConfig {
			c := stdioServer("stdio")
			c.EnabledTools = []string{"echo", "mcp_srv_add", "no_such_tool"}
			return c
		}(),
		"off": {Command: "/nonexistent/never-started", Disabled: true},
	})
	rig.waitState("srv", StateConnected)
	var names []string
	for _, s := range rig.reg.Specs() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "mcp_srv_add,mcp_srv_echo" {
		t.Errorf("registered %s, want only the enabled mcp_srv_add,mcp_srv_echo", got)
	}
	if st := rig.status("off"); st.State != StateDisabled || st.Transport != "stdio" {
		t.Errorf("disabled server: %+v", st)
	}
}

func TestStdioEnvironmentAndWorkDir(t *testing.T) {
	t.Setenv("NANOBOT_TEST_SECRET_TOKEN", "s3cret-value") // the daemon's environment
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := stdioServer("stdio")
	cfg.Cwd = "sub"
	cfg.Env["EXTRA"] = "yes"
	rig := startManager(t, map[string]config.MCPServerConfig{"srv": cfg}, func(o *Options) { o.Workspace = ws })
	rig.waitState("srv", StateConnected)
	wd, env, _ := strings.Cut(rig.call("mcp_srv_environ", map[string]any{}).Content.Live, "\n")
	if want, _ := filepath.EvalSymlinks(filepath.Join(ws, "sub")); wd != want {
		t.Errorf("server runs in %s, want %s (cwd relative to the workspace)", wd, want)
	}
	names := strings.Split(env, ",")
	for _, want := range []string{"PATH", "EXTRA", serverModeEnv} {
		if !slices.Contains(names, want) {
			t.Errorf("server environment lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "NANOBOT_TEST_SECRET_TOKEN") {
		t.Error("the daemon's environment leaked to the server")
	}
}

func TestWorkDir(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	tests := []struct{ cwd, workspace, want string }{
		{"", "/ws", "/ws"},
		{"sub/dir", "/ws", "/ws/sub/dir"},
		{"/abs", "/ws", "/abs"},
		{"~/x", "/ws", filepath.Join(home, "x")},
		{"", "", ""},
	}
	for _, tc := range tests {
		if got := workDir(tc.cwd, tc.workspace); got != tc.want {
			t.Errorf("workDir(%q, %q) = %q, want %q", tc.cwd, tc.workspace, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		n      int
		lo, hi time.Duration
		want   time.Duration
	}{
		{1, time.Second, time.Minute, time.Second},
		{2, time.Second, time.Minute, 2 * time.Second},
		{6, time.Second, time.Minute, 32 * time.Second},
		{7, time.Second, time.Minute, time.Minute},
		{1000, 10 * time.Second, 5 * time.Minute, 5 * time.Minute}, // no overflow
	}
	for _, tc := range tests {
		if got := backoff(tc.n, tc.lo, tc.hi); got != tc.want {
			t.Errorf("backoff(%d, %s, %s) = %s, want %s", tc.n, tc.lo, tc.hi, got, tc.want)
		}
	}
}
