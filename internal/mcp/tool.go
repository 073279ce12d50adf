package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// maxImageBytes caps one image passed on to the model; bigger ones are
// replaced by a note (providers reject them, and they bloat the session).
const maxImageBytes = 5 << 20

// imageMIMEs are the image types both providers accept.
var imageMIMEs = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// tool is one MCP server tool offered to the model as mcp_<server>_<tool>.
type tool struct {
	srv      *server
	remote   string // the tool's name on the server
	spec     llm.ToolSpec
	readOnly bool
}

var (
	_ tools.Tool         = (*tool)(nil)
	_ tools.ReadOnlyTool = (*tool)(nil)
)

func (t *tool) Spec() llm.ToolSpec { return t.spec }

// ReadOnly passes on the server's readOnlyHint, so read-only calls of one
// model turn may run in parallel.
func (t *tool) ReadOnly() bool { return t.readOnly }

// Run calls the tool on the server's current session within tool_timeout.
func (t *tool) Run(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	sess := t.srv.current()
	if sess == nil {
		st := t.srv.status()
		msg := fmt.Sprintf("Error: the MCP server %q is not connected (%s), so %s was not run; try again later.",
			t.srv.name, st.State, t.spec.Name)
		if st.LastError != "" {
			msg += " Last error: " + st.LastError
		}
		return tools.Result{Text: msg, IsError: true}, nil
	}
	callCtx, stop := t.withTimeout(ctx)
	defer stop()
	res, err := sess.CallTool(callCtx, &sdk.CallToolParams{Name: t.remote, Arguments: json.RawMessage(inv.Args)})
	if err != nil {
		return t.failed(ctx, callCtx, err)
	}
	return convertResult(res), nil
}

// errToolTimeout is the cause of a call's context ending at tool_timeout.
var errToolTimeout = errors.New("tool_timeout reached")

// withTimeout is context.WithTimeout(ctx, tool_timeout) on the manager's
// clock, so tests can make a call time out without waiting for it.
func (t *tool) withTimeout(ctx context.Context) (context.Context, func()) {
	callCtx, cancel := context.WithCancelCause(ctx)
	timer := t.srv.opts.Clock.NewTimer(t.srv.timeout)
	done := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-timer.C():
			cancel(errToolTimeout)
		case <-done:
		}
	})
	return callCtx, func() {
		close(done)
		watcher.Wait()
		timer.Stop()
		cancel(nil)
	}
}

// failed turns a call that got no result into the error the model sees.
func (t *tool) failed(parent, callCtx context.Context, err error) (tools.Result, error) {
	switch {
	case parent.Err() != nil:
		return tools.Result{}, parent.Err() // the turn was stopped; the registry says so
	case errors.Is(context.Cause(callCtx), errToolTimeout):
		return tools.Result{IsError: true, Text: fmt.Sprintf(
			"Error: %s timed out after %s (tools.mcp_servers.%s.tool_timeout) and was cancelled; "+
				"try a smaller request or another approach.", t.spec.Name, t.srv.timeout, t.srv.name)}, nil
	}
	if rpcErr, ok := serverAnswer(err); ok {
		// The server answered with a protocol error (unknown tool, bad
		// arguments...): the connection is fine.
		return tools.Result{IsError: true, Text: fmt.Sprintf("Error: the MCP server %q refused %s: %s",
			t.srv.name, t.spec.Name, t.srv.redact(rpcErr.Message))}, nil
	}
	// Anything else is the transport: the process died or the connection
	// broke. Have the connection checked (and remade) in the background.
	t.srv.suspect()
	return tools.Result{IsError: true, Text: fmt.Sprintf(
		"Error: the connection to the MCP server %q failed during %s (%s); it is reconnected if it is down. "+
			"The call may or may not have taken effect; try again later.", t.srv.name, t.spec.Name, t.srv.redact(err.Error()))}, nil
}

// Error codes the SDK uses for its own connection state, not the server's
// answers: client closing, server closing, rejected by the transport.
var connectionCodes = []int64{-32003, -32004, -32005}

// serverAnswer returns err's JSON-RPC error when the server sent it.
func serverAnswer(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || slices.Contains(connectionCodes, rpcErr.Code) || errors.Is(err, sdk.ErrConnectionClosed) {
		return nil, false
	}
	return rpcErr, true
}

// convertResult maps an MCP tool result to a tool result: text parts joined
// by newlines, images passed on as images, other content described in a
// line, structured content added as JSON text unless a text part already
// carries it, and isError kept.
func convertResult(res *sdk.CallToolResult) tools.Result {
	var texts []string
	var images []llm.Image
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
		case *sdk.ImageContent:
			mime := strings.ToLower(c.MIMEType)
			switch {
			case !imageMIMEs[mime]:
				texts = append(texts, fmt.Sprintf("[image of type %q omitted: the model cannot read it]", c.MIMEType))
			case len(c.Data) > maxImageBytes:
				texts = append(texts, fmt.Sprintf("[image omitted: %d bytes is over the %d-byte limit]", len(c.Data), maxImageBytes))
			default:
				images = append(images, llm.Image{MIME: mime, Data: c.Data})
			}
		case *sdk.AudioContent:
			texts = append(texts, fmt.Sprintf("[audio omitted (%s, %d bytes): the model cannot hear it]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			texts = append(texts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			texts = append(texts, embeddedText(c.Resource))
		default:
			texts = append(texts, fmt.Sprintf("[unsupported content %T omitted]", c))
		}
	}
	if res.StructuredContent != nil {
		if js, err := json.Marshal(res.StructuredContent); err == nil && !carriesJSON(texts, js) {
			texts = append(texts, string(js))
		}
	}
	return tools.Result{Text: strings.Join(texts, "\n"), Images: images, IsError: res.IsError}
}

func embeddedText(r *sdk.ResourceContents) string {
	switch {
	case r == nil:
		return "[empty resource]"
	case r.Text != "":
		return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
	}
	return fmt.Sprintf("[binary resource %s omitted (%s, %d bytes)]", r.URI, r.MIMEType, len(r.Blob))
}

// carriesJSON reports whether one of texts is the JSON value js (servers
// often send structured content twice, as a value and as its text).
func carriesJSON(texts []string, js []byte) bool {
	var want any
	if json.Unmarshal(js, &want) != nil {
		return false
	}
	for _, t := range texts {
		var got any
		if json.Unmarshal([]byte(t), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}
