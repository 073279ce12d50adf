package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// appendConfig adds YAML to the user's config file.
func (e *env) appendConfig(yaml string) {
	e.t.Helper()
	f, err := os.OpenFile(filepath.Join(e.home, ".nanobot", "config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(yaml); err != nil {
		e.t.Fatal(err)
	}
}

// notesServer is an MCP server built with the official SDK, over streamable
// HTTP, with one tool.
func notesServer(t *testing.T) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
	type query struct {
		Q string `json:"q"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "search", Description: "Search the notes."},
		func(_ context.Context, _ *sdk.CallToolRequest, in query) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "notes about " + in.Q + ": dentist on friday"}}}, nil, nil
		})
	h := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(h.Close)
	return h.URL
}

// `nanobot agent -m` and the REPL start the configured MCP servers: the
// model is offered their tools and its calls reach them; a server that
// cannot start is named on stderr, and the answer still comes.
func TestAgentUsesMCPServers(t *testing.T) {
	e := newEnv(t)
	url := notesServer(t)
	e.appendConfig(`
tools:
  mcp_servers:
    notes: {url: "` + url + `"}
    broken: {command: "` + filepath.Join(e.home, "no-such-mcp-server") + `"}
`)
	e.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "mcp_notes_search", Args: `{"q":"friday"}`}}},
		fakellm.Reply{Text: "You see the dentist on friday."},
	)
	out, stderr, err := e.run("agent", "-m", "what is on friday?")
	if err != nil || strings.TrimSpace(out) != "You see the dentist on friday." {
		t.Fatalf("agent -m: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	reqs := e.script.Requests()
	if len(reqs) != 2 || !slices.Contains(reqs[0].Tools, "mcp_notes_search") {
		t.Fatalf("the model was not offered the MCP tool: %d requests, tools %v", len(reqs), reqs[0].Tools)
	}
	if res := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults; len(res) != 1 || res[0].Content != "notes about friday: dentist on friday" {
		t.Errorf("tool result sent to the model = %+v, want the MCP server's answer", res)
	}
	if want := "MCP server broken (stdio) did not start: "; !strings.Contains(stderr, want) ||
		!strings.Contains(stderr, "its tools are not available for this message") {
		t.Errorf("stderr does not name the broken server (%q):\n%s", want, stderr)
	}

	// The REPL too, and /status shows the servers.
	e.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_2", Name: "mcp_notes_search", Args: `{"q":"monday"}`}}},
		fakellm.Reply{Text: "Nothing on monday."},
	)
	out, stderr, err = e.runWith("and monday?\n/status\n", nil, "agent")
	if err != nil || !strings.Contains(out, "Nothing on monday.") {
		t.Fatalf("agent REPL: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	if reqs := e.script.Requests(); len(reqs) != 4 || !strings.Contains(reqs[3].Messages[len(reqs[3].Messages)-1].ToolResults[0].Content, "notes about monday") {
		t.Errorf("the REPL's tool call did not reach the MCP server")
	}
	for _, want := range []string{"MCP notes (http): connected, 1 tool", "MCP broken (stdio): retrying"} {
		if !strings.Contains(out, want) {
			t.Errorf("/status lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "its tools are missing until it connects (/status shows it)") {
		t.Errorf("the REPL's stderr does not explain the missing server:\n%s", stderr)
	}
}

// A server that does not finish starting within --mcp-wait does not hold
// the message: the answer comes without its tools, and stderr says so.
func TestAgentDoesNotWaitLongerThanMCPWait(t *testing.T) {
	e := newEnv(t)
	// sleep never answers the MCP handshake: a server stuck at start.
	e.appendConfig(`
tools:
  mcp_servers:
    stuck: {command: sleep, args: ["60"]}
`)
	e.script.Push(fakellm.Reply{Text: "Hello anyway."})
	out, stderr, err := e.run("agent", "--mcp-wait", "300ms", "-m", "hello")
	if err != nil || strings.TrimSpace(out) != "Hello anyway." {
		t.Fatalf("agent -m: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	if want := "MCP server stuck (stdio) is still starting after 300ms: its tools are not available for this message."; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if tools := e.script.Requests()[0].Tools; slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "mcp_") }) {
		t.Errorf("tools offered = %v, want none of the stuck server", tools)
	}
}
