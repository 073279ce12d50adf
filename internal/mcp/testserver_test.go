package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The test binary doubles as a stdio MCP server: TestMain runs it when
// serverModeEnv is set, so the tests start a real child process speaking
// the real protocol without building anything.
const serverModeEnv = "NANOBOT_MCP_TEST_SERVER"

// pidFileEnv names the file the stubborn server writes its pid to.
const pidFileEnv = "NANOBOT_MCP_TEST_PIDFILE"

func TestMain(m *testing.M) {
	switch os.Getenv(serverModeEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "stdio":
		s := newTestServer(func() { os.Exit(3) }, nil)
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "mute":
		// Reads requests and never answers: a server stuck at startup.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "broken":
		fmt.Fprintln(os.Stderr, "fatal: cannot open database")
		os.Exit(2)
	case "stubborn":
		// Answers nothing, ignores stdin closing and SIGTERM: only SIGKILL
		// stops it. It writes its pid where the test can find it.
		signal.Ignore(syscall.SIGTERM)
		if err := os.WriteFile(os.Getenv(pidFileEnv), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			os.Exit(1)
		}
		time.Sleep(time.Hour)
		os.Exit(0)
	case "sleep":
		time.Sleep(time.Hour) // a grandchild the server left behind
		os.Exit(0)
	}
}

// pngPixel is a 1x1 PNG.
var pngPixel, _ = base64.StdEncoding.DecodeString(
	"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type hugeIn struct {
	Bytes int `json:"bytes"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

var emptyObject = map[string]any{"type": "object"}

// newTestServer is the MCP server every test talks to. crash is what its
// crash tool does: exit for a stdio child, drop the connections of an HTTP
// one. A call of block ends when it is cancelled or done closes (the
// client's cancellation is best-effort; an HTTP server must not hang the
// test's cleanup).
func newTestServer(crash func(), done <-chan struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "testserver", Version: "1"}, nil)
	var blocked, cancelled atomic.Int32 // block calls started, and ended by the client's cancellation
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	// Typed output: the SDK sends the value as structured content and as
	// its JSON text.
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two integers.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	s.AddTool(&sdk.Tool{Name: "stats", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"files": 3, "ok": true}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk quota exceeded"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "reject", Description: "Answers with a protocol error.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "path must be relative"}
		})
	// A text result of the asked size, to go over (or stay under) the
	// client's message limit.
	sdk.AddTool(s, &sdk.Tool{Name: "huge", Description: "Answer with this many bytes of text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in hugeIn) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "image", Description: "Draw a dot.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a red dot"},
				&sdk.ImageContent{MIMEType: "image/png", Data: pngPixel},
			}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "block", Description: "Never finishes.", InputSchema: emptyObject},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			blocked.Add(1)
			select {
			case <-ctx.Done():
				cancelled.Add(1)
				return nil, ctx.Err()
			case <-done:
				return nil, errors.New("server stopped")
			}
		})
	s.AddTool(&sdk.Tool{Name: "block_stats", Description: "How many block calls started and were cancelled.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprintf("%d started, %d cancelled", blocked.Load(), cancelled.Load())), nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Crashes the server.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			crash()
			return text("still here"), nil
		})
	s.AddTool(&sdk.Tool{Name: "pid", Description: "The server's process id.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(&sdk.Tool{Name: "spawn", Description: "Start a helper process; return its pid.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), serverModeEnv+"=sleep")
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			return text(strconv.Itoa(cmd.Process.Pid)), nil
		})
	s.AddTool(&sdk.Tool{Name: "environ", Description: "The working directory and environment variable names.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			wd, _ := os.Getwd()
			var names []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				names = append(names, name)
			}
			slices.Sort(names)
			return text(wd + "\n" + strings.Join(names, ",")), nil
		})
	// A name providers refuse, to be sanitised.
	s.AddTool(&sdk.Tool{Name: "files.read/v2", Description: "Read a file.", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("read " + string(req.Params.Arguments)), nil
		})
	s.AddTool(&sdk.Tool{Name: "add_late", Description: "Adds the tool late.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.AddTool(&sdk.Tool{Name: "late", Description: "Added at run time.", InputSchema: emptyObject},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return text("late tool"), nil
				})
			return text("added"), nil
		})
	s.AddTool(&sdk.Tool{Name: "remove_late", Description: "Removes the late tool.", InputSchema: emptyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.RemoveTools("late")
			return text("removed"), nil
		})
	return s
}

// httpServer is the test server behind streamable HTTP. Crash drops every
// connection and replaces the server with a fresh one, as a restart would.
type httpServer struct {
	*httptest.Server
	done    chan struct{} // closed when the test ends
	mu      sync.Mutex
	handler http.Handler
	servers []*sdk.Server // the current one last
	headers http.Header   // of the last request
}

func newHTTPServer(t testing.TB) *httpServer {
	t.Helper()
	h := &httpServer{done: make(chan struct{})}
	h.restart()
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		handler := h.handler
		h.headers = r.Header.Clone()
		h.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(h.done)
		// The sessions of servers that were "restarted" are left to us, and
		// Close waits for their requests.
		h.mu.Lock()
		servers := h.servers
		h.mu.Unlock()
		for _, s := range servers {
			for ss := range s.Sessions() {
				_ = ss.Close()
			}
		}
		h.Close()
	})
	return h
}

func (h *httpServer) restart() {
	s := newTestServer(func() {
		h.restart()
		// The call in flight is dropped with its connection.
		h.CloseClientConnections()
	}, h.done)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers = append(h.servers, s)
	h.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

func (h *httpServer) lastHeader(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.headers.Get(name)
}
