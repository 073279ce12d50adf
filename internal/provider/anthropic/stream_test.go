package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestStream runs scripted answers through the adapter over HTTP and checks
// what the Accumulator makes of the deltas.
func TestStream(t *testing.T) {
	sig := func(p llm.Part) bool { return p.Signature != "" }
	tests := []struct {
		name  string
		reply fakellm.Reply
		want  []llm.Part
		// check inspects parts the test cannot spell out (signatures).
		check func(t *testing.T, parts []llm.Part)
		stop  llm.StopReason
		usage *llm.Usage
	}{
		{
			name:  "text",
			reply: fakellm.Reply{Text: "Hello, wörld — ünïcode split across chunks ✓", Chunk: 5},
			want:  []llm.Part{llm.Text("Hello, wörld — ünïcode split across chunks ✓")},
			stop:  llm.StopEnd,
		},
		{
			name:  "thinking with signature then text",
			reply: fakellm.Reply{Thinking: "The user greets me; answer briefly.", Text: "Hi!"},
			check: func(t *testing.T, parts []llm.Part) {
				if len(parts) != 2 || parts[0].Kind != llm.PartThinking || parts[0].Text != "The user greets me; answer briefly." || !sig(parts[0]) {
					t.Fatalf("want a signed thinking part first, got %+v", parts)
				}
				if parts[1] != llm.Text("Hi!") {
					t.Fatalf("want the text after the thinking, got %+v", parts[1])
				}
			},
			stop: llm.StopEnd,
		},
		{
			name:  "redacted thinking kept opaque",
			reply: fakellm.Reply{RedactedThinking: "EmwKAhgBEgy3va3pzix/LafPsn4a", Thinking: "visible", Signature: "sig-visible", Text: "ok"},
			want: []llm.Part{
				{Kind: llm.PartThinking, Text: "EmwKAhgBEgy3va3pzix/LafPsn4a", Redacted: true},
				{Kind: llm.PartThinking, Text: "visible", Signature: "sig-visible"},
				llm.Text("ok"),
			},
			stop: llm.StopEnd,
		},
		{
			name: "two tool calls with fragmented arguments",
			reply: fakellm.Reply{Text: "Let me look.", Chunk: 3, ToolCalls: []fakellm.Call{
				{ID: "toolu_01", Name: "read_file", Args: `{"path": "notes/todo.md", "limit": 20}`},
				{ID: "toolu_02", Name: "list_dir", Args: `{"path": "."}`},
			}},
			want: []llm.Part{
				llm.Text("Let me look."),
				{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "toolu_01", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes/todo.md","limit":20}`)}},
				{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "toolu_02", Name: "list_dir", Arguments: json.RawMessage(`{"path":"."}`)}},
			},
			stop: llm.StopToolCalls,
		},
		{
			name:  "tool call without arguments",
			reply: fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "toolu_01", Name: "list_dir"}}},
			want:  []llm.Part{{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "toolu_01", Name: "list_dir", Arguments: json.RawMessage(`{}`)}}},
			stop:  llm.StopToolCalls,
		},
		{
			name:  "tool arguments that are not JSON keep the raw text",
			reply: fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "toolu_01", Name: "exec", Args: `{"command": "ls`}}},
			want: []llm.Part{{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "toolu_01", Name: "exec", RawArgs: `{"command": "ls`,
				ParseError: "arguments are not valid JSON: unexpected end of JSON input"}}},
			stop: llm.StopToolCalls,
		},
		{
			name:  "usage with prompt cache",
			reply: fakellm.Reply{Text: "cached", InputTokens: 1200, OutputTokens: 7, CacheReadTokens: 1000, CacheWriteTokens: 150},
			want:  []llm.Part{llm.Text("cached")},
			stop:  llm.StopEnd,
			usage: &llm.Usage{InputTokens: 1200, OutputTokens: 7, CacheReadTokens: 1000, CacheWriteTokens: 150},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.script.Push(tt.reply)
			res := run(t, f.p, context.Background(), ask("hello"))
			if res.err != nil {
				t.Fatalf("stream failed: %v", res.err)
			}
			if tt.check != nil {
				tt.check(t, res.msg.Parts)
			} else if !reflect.DeepEqual(res.msg.Parts, tt.want) {
				got, _ := json.Marshal(res.msg.Parts)
				want, _ := json.Marshal(tt.want)
				t.Fatalf("parts\n got %s\nwant %s", got, want)
			}
			meta := res.msg.Meta
			if meta.Provider != "claude" || meta.API != "anthropic" || meta.Model != testModel {
				t.Errorf("meta = %+v, want provider claude, api anthropic, model %s", meta, testModel)
			}
			if meta.StopReason != tt.stop {
				t.Errorf("stop reason = %q, want %q", meta.StopReason, tt.stop)
			}
			if tt.usage != nil && meta.Usage != *tt.usage {
				t.Errorf("usage = %+v, want %+v", meta.Usage, *tt.usage)
			}
			if meta.Usage.OutputTokens == 0 || meta.Usage.InputTokens == 0 {
				t.Errorf("usage not reported: %+v", meta.Usage)
			}
			if err := res.msg.Validate(); err != nil {
				t.Errorf("assembled message invalid: %v", err)
			}
			noRejections(t, f.srv)
		})
	}
}

// TestStreamFailures checks that every failure is one error terminal the
// router can classify.
func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name  string
		reply fakellm.Reply
		key   string // API key to configure instead of the right one
		check func(t *testing.T, err error)
	}{
		{
			name:  "429 with retry-after seconds",
			reply: fakellm.Reply{Status: 429, RetryAfter: "7"},
			check: wantAPIError(429, "rate_limit_error", 7*time.Second, true, false),
		},
		{
			name:  "429 with retry-after-ms wins over retry-after",
			reply: fakellm.Reply{Status: 429, RetryAfter: "7", RetryAfterMS: "1500"},
			check: wantAPIError(429, "rate_limit_error", 1500*time.Millisecond, true, false),
		},
		{
			name:  "529 overloaded",
			reply: fakellm.Reply{Status: 529, RetryAfter: "2"},
			check: wantAPIError(529, "overloaded_error", 2*time.Second, true, false),
		},
		{
			name:  "500 api error",
			reply: fakellm.Reply{Status: 500},
			check: wantAPIError(500, "api_error", 0, true, false),
		},
		{
			name:  "400 invalid request is final",
			reply: fakellm.Reply{Status: 400, ErrorMessage: "prompt is too long: 250000 tokens > 200000 maximum"},
			check: func(t *testing.T, err error) {
				wantAPIError(400, "invalid_request_error", 0, false, false)(t, err)
				var apiErr *llm.APIError
				errors.As(err, &apiErr)
				if apiErr.Message != "prompt is too long: 250000 tokens > 200000 maximum" {
					t.Errorf("message = %q, want the server's message", apiErr.Message)
				}
			},
		},
		{
			name:  "401 wrong key",
			key:   "sk-ant-wrong",
			check: wantAPIError(401, "authentication_error", 0, false, true),
		},
		{
			name:  "truncated stream",
			reply: fakellm.Reply{Text: "partial answer", ToolCalls: []fakellm.Call{{ID: "toolu_01", Name: "x", Args: `{"a":`}}, Truncate: true},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrTruncated) {
					t.Fatalf("err = %v, want llm.ErrTruncated", err)
				}
			},
		},
		{
			name:  "mid-stream overloaded error event",
			reply: fakellm.Reply{Text: "partial", MidStreamError: "overloaded_error"},
			check: func(t *testing.T, err error) {
				wantAPIError(0, "overloaded_error", 0, true, false)(t, err)
				if want := "claude: stream error overloaded_error: Overloaded"; err.Error() != want {
					t.Errorf("error text = %q, want %q", err.Error(), want)
				}
			},
		},
		{
			name:  "garbage event",
			reply: fakellm.Reply{Text: "some text", Garbage: true},
			check: wantAPIError(0, "invalid_stream", 0, true, false),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.ProviderConfig) {
				if tt.key != "" {
					c.APIKey = tt.key
				}
			})
			f.script.Push(tt.reply)
			res := run(t, f.p, context.Background(), ask("hello"))
			if res.err == nil {
				t.Fatalf("want an error terminal, got message %+v", res.msg)
			}
			last := res.deltas[len(res.deltas)-1]
			if last.Kind != llm.DeltaError || !errors.Is(res.err, last.Err) {
				t.Fatalf("last delta = %+v, want the error terminal", last)
			}
			if res.deltas[0].Meta == nil || res.deltas[0].Meta.API != "anthropic" {
				t.Errorf("start delta lacks meta: %+v", res.deltas[0])
			}
			tt.check(t, res.err)
		})
	}
}

func wantAPIError(status int, typ string, retryAfter time.Duration, retryable, auth bool) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %T %v, want *llm.APIError", err, err)
		}
		if apiErr.Status != status || apiErr.Type != typ || apiErr.RetryAfter != retryAfter {
			t.Errorf("got status %d type %q retry-after %s, want %d %q %s", apiErr.Status, apiErr.Type, apiErr.RetryAfter, status, typ, retryAfter)
		}
		if apiErr.Retryable() != retryable || apiErr.Auth() != auth {
			t.Errorf("retryable=%v auth=%v, want %v %v", apiErr.Retryable(), apiErr.Auth(), retryable, auth)
		}
		if apiErr.Provider != "claude" || apiErr.Message == "" {
			t.Errorf("provider %q message %q: want both set", apiErr.Provider, apiErr.Message)
		}
	}
}

// TestTransportFailures: a connection that cannot be made is a retryable
// APIError; one that drops after the stream began is a truncation.
func TestTransportFailures(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		url := closed.URL
		closed.Close()
		client := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(client.CloseIdleConnections)
		p := New("claude", config.ProviderConfig{APIKey: "k", BaseURL: url}, client, zaptest.NewLogger(t))
		res := run(t, p, context.Background(), ask("hi"))
		var apiErr *llm.APIError
		if !errors.As(res.err, &apiErr) || apiErr.Status != 0 || !apiErr.Retryable() {
			t.Fatalf("err = %v, want a retryable APIError without status", res.err)
		}
	})
	t.Run("connection dropped mid-stream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer func() { _ = conn.Close() }()
			// A chunked response cut inside a chunk: the client sees an
			// unexpected EOF, not a clean end.
			event := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n400\r\nevent: content_bl", len(event), event)
			_ = buf.Flush()
		}))
		t.Cleanup(srv.Close)
		client := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(client.CloseIdleConnections)
		p := New("claude", config.ProviderConfig{APIKey: "k", BaseURL: srv.URL}, client, zaptest.NewLogger(t))
		res := run(t, p, context.Background(), ask("hi"))
		if !errors.Is(res.err, llm.ErrTruncated) {
			t.Fatalf("err = %v, want llm.ErrTruncated", res.err)
		}
	})
}

// TestRawEvents feeds hand-written event streams to the adapter: the framing
// cases the fake never produces.
func TestRawEvents(t *testing.T) {
	const (
		start   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
		block   = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		delta   = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
		stop    = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
		msgDone = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5,\"cache_read_input_tokens\":null}}\n\n"
		msgStop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	tests := []struct {
		name string
		body string
		// want is the answer's text, or check looks at the error.
		want  string
		check func(t *testing.T, err error)
	}{
		{
			name: "comments, crlf, pings, nameless and unknown events are skipped",
			body: strings.ReplaceAll(": keep-alive\n\n"+start+"event: ping\ndata: {\"type\": \"ping\"}\n\n"+block+delta+
				"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"nameless\"}}\n\n"+
				"event: future_event\ndata: {\"type\":\"future_event\",\"index\":7}\n\n"+
				stop+msgDone+msgStop, "\n", "\r\n"),
			want: "hi",
		},
		{
			name: "message_stop cut short by the end of the body",
			body: start + block + delta + stop + msgDone + strings.TrimSuffix(msgStop, "\n\n"),
			check: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrTruncated) {
					t.Fatalf("err = %v, want llm.ErrTruncated", err)
				}
			},
		},
		{
			name: "error event that is not JSON",
			body: start + "event: error\ndata: upstream went away\n\n",
			check: func(t *testing.T, err error) {
				wantAPIError(0, "", 0, true, false)(t, err)
				if want := "claude: upstream went away"; err.Error() != want {
					t.Errorf("error text = %q, want %q", err.Error(), want)
				}
			},
		},
		{
			name: "error event keeps the request id in the cause",
			body: start + block + delta + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n",
			check: func(t *testing.T, err error) {
				wantAPIError(0, "api_error", 0, true, false)(t, err)
				var apiErr *llm.APIError
				errors.As(err, &apiErr)
				if cause := apiErr.Err; cause == nil || !strings.Contains(cause.Error(), "(request-id req_raw)") {
					t.Errorf("cause = %v, want the request id", cause)
				}
			},
		},
		{
			name:  "event of the wrong shape",
			body:  start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":\"0\"}\n\n",
			check: wantAPIError(0, "invalid_stream", 0, true, false),
		},
		{
			name: "not an event stream",
			body: `{"id":"msg_1","type":"message","content":[]}`,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrTruncated) {
					t.Fatalf("err = %v, want llm.ErrTruncated", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("request-id", "req_raw")
				_, _ = fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			client := &http.Client{Transport: &http.Transport{}}
			t.Cleanup(client.CloseIdleConnections)
			p := New("claude", config.ProviderConfig{APIKey: "k", BaseURL: srv.URL}, client, zaptest.NewLogger(t))
			res := run(t, p, context.Background(), ask("hi"))
			if tt.check != nil {
				if res.err == nil {
					t.Fatalf("want an error terminal, got %+v", res.msg)
				}
				tt.check(t, res.err)
				return
			}
			if res.err != nil {
				t.Fatalf("stream failed: %v", res.err)
			}
			if res.msg.Text() != tt.want || res.msg.Meta.Model != "claude-x" || res.msg.Meta.Usage.OutputTokens != 5 {
				t.Errorf("text %q meta %+v, want %q from claude-x with 5 output tokens", res.msg.Text(), res.msg.Meta, tt.want)
			}
		})
	}
}
