package anthropicfake

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends a raw Messages request and returns the status and body.
func post(t *testing.T, s *Server, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", APIKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(raw)
}

// req builds a request body around a messages array.
func req(messages string, extra ...string) string {
	fields := append([]string{`"model":"claude-haiku-4-5"`, `"max_tokens":1024`, `"messages":` + messages}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

const (
	use1     = `{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}}`
	use2     = `{"type":"tool_use","id":"toolu_2","name":"list_dir","input":{}}`
	result1  = `{"type":"tool_result","tool_use_id":"toolu_1","content":"A"}`
	result2  = `{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"B"}]}`
	hi       = `{"role":"user","content":"hi"}`
	toolDefs = `"tools":[{"name":"read_file","input_schema":{"type":"object"}},{"name":"list_dir","input_schema":{"type":"object"}}]`
)

// TestValidation: each rule Anthropic enforces is enforced here, with a 400
// invalid_request_error naming it; valid requests pass.
func TestValidation(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		header  map[string]string
		status  int
		message string // substring of the error message; "" for success
	}{
		{name: "valid text", body: req(`[` + hi + `]`), status: 200},
		{name: "valid tool round", body: req(`[`+hi+`,{"role":"assistant","content":[{"type":"text","text":"looking"},`+use1+`,`+use2+`]},{"role":"user","content":[`+result1+`,`+result2+`,{"type":"text","text":"thanks"}]}]`, toolDefs), status: 200},
		{name: "wrong key", body: req(`[` + hi + `]`), header: map[string]string{"x-api-key": "nope"}, status: 401, message: "invalid x-api-key"},
		{name: "no version header", body: req(`[` + hi + `]`), header: map[string]string{"anthropic-version": ""}, status: 400, message: "anthropic-version"},
		{name: "unknown version", body: req(`[` + hi + `]`), header: map[string]string{"anthropic-version": "2025-01-01"}, status: 400, message: "not a valid version"},
		{name: "not JSON", body: `{"model":`, status: 400, message: "invalid request body"},
		{name: "unknown field", body: req(`[`+hi+`]`, `"frequency_penalty":1`), status: 400, message: "unknown field"},
		{name: "max_tokens missing", body: `{"model":"m","messages":[` + hi + `]}`, status: 400, message: "max_tokens: Field required"},
		{name: "no messages", body: req(`[]`), status: 400, message: "at least one message"},
		{name: "first message assistant", body: req(`[{"role":"assistant","content":"hello"},` + hi + `]`), status: 400, message: "first message must use the \"user\" role"},
		{name: "roles do not alternate", body: req(`[` + hi + `,` + hi + `]`), status: 400, message: "roles must alternate"},
		{name: "system role in messages", body: req(`[{"role":"system","content":"x"}]`), status: 400, message: "Input should be 'user' or 'assistant'"},
		{name: "empty text block", body: req(`[{"role":"user","content":[{"type":"text","text":"  "}]}]`), status: 400, message: "non-whitespace text"},
		{name: "tool_use without result", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`,`+use2+`]},{"role":"user","content":[`+result1+`]}]`, toolDefs), status: 400, message: "without `tool_result` blocks immediately after: toolu_2"},
		{name: "tool_use at the end", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`]}]`, toolDefs), status: 400, message: "toolu_1"},
		{name: "result for unknown call", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`]},{"role":"user","content":[`+result1+`,{"type":"tool_result","tool_use_id":"toolu_9","content":"?"}]}]`, toolDefs), status: 400, message: "unexpected `tool_use_id`"},
		{name: "result without previous tool_use", body: req(`[{"role":"user","content":[` + result1 + `]}]`), status: 400, message: "previous message does not contain any `tool_use`"},
		{name: "results split over two messages", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`,`+use2+`]},{"role":"user","content":[`+result1+`]},{"role":"assistant","content":"ok"},{"role":"user","content":[`+result2+`]}]`, toolDefs), status: 400, message: "toolu_2"},
		{name: "text before tool_result", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`]},{"role":"user","content":[{"type":"text","text":"x"},`+result1+`]}]`, toolDefs), status: 400, message: "must come before any other content"},
		{name: "duplicate result", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`]},{"role":"user","content":[`+result1+`,`+result1+`]}]`, toolDefs), status: 400, message: "only have one `tool_result`"},
		{name: "duplicate tool_use id", body: req(`[`+hi+`,{"role":"assistant","content":[`+use1+`,`+use1+`]},{"role":"user","content":[`+result1+`]}]`, toolDefs), status: 400, message: "ids must be unique"},
		{name: "bad tool_use id", body: req(`[`+hi+`,{"role":"assistant","content":[{"type":"tool_use","id":"call:0","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call:0"}]}]`, toolDefs), status: 400, message: "should match pattern"},
		{name: "tool_use input not an object", body: req(`[`+hi+`,{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":"ls"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]`, toolDefs), status: 400, message: "valid dictionary"},
		{name: "thinking without signature", body: req(`[` + hi + `,{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"a"}]},` + hi + `]`), status: 400, message: "signature: Field required"},
		{name: "thinking in a user message", body: req(`[{"role":"user","content":[{"type":"thinking","thinking":"x","signature":"s"}]}]`), status: 400, message: "may not contain \"thinking\""},
		{name: "bad image type", body: req(`[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]}]`), status: 400, message: "media_type"},
		{name: "thinking budget too small", body: req(`[`+hi+`]`, `"thinking":{"type":"enabled","budget_tokens":100}`), status: 400, message: "greater than or equal to 1024"},
		{name: "thinking budget not below max_tokens", body: req(`[`+hi+`]`, `"thinking":{"type":"enabled","budget_tokens":2048}`), status: 400, message: "must be greater than `thinking.budget_tokens`"},
		{name: "thinking with temperature", body: `{"model":"m","max_tokens":4096,"temperature":0.2,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + hi + `]}`, status: 400, message: "temperature"},
		{name: "thinking with forced tool", body: `{"model":"m","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},` + toolDefs + `,"tool_choice":{"type":"tool","name":"read_file"},"messages":[` + hi + `]}`, status: 400, message: "tool_choice forces tool use"},
		{name: "thinking tool loop without thinking block", body: `{"model":"m","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},` + toolDefs + `,"messages":[` + hi + `,{"role":"assistant","content":[` + use1 + `]},{"role":"user","content":[` + result1 + `]}]}`, status: 400, message: "must start with a thinking block"},
		{name: "forced tool unknown", body: req(`[`+hi+`]`, toolDefs, `"tool_choice":{"type":"tool","name":"exec"}`), status: 400, message: "Tool 'exec' not found"},
		{name: "tool schema not an object", body: req(`[`+hi+`]`, `"tools":[{"name":"x","input_schema":{"type":"string"}}]`), status: 400, message: "input_schema.type"},
		{name: "too many cache breakpoints", body: req(`[{"role":"user","content":[` + strings.Repeat(`{"type":"text","text":"x","cache_control":{"type":"ephemeral"}},`, 4) + `{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}]`), status: 400, message: "maximum of 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := &fakellm.Script{}
			s := New(t, script)
			status, _, body := post(t, s, tt.body, tt.header)
			if status != tt.status {
				t.Fatalf("status = %d, want %d; body %s", status, tt.status, body)
			}
			if tt.status == 200 {
				if len(script.Requests()) != 1 || len(s.Rejected()) != 0 {
					t.Fatalf("accepted request not recorded: %d requests, %d rejected", len(script.Requests()), len(s.Rejected()))
				}
				return
			}
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" {
				t.Fatalf("error body %q is not Anthropic's shape: %v", body, err)
			}
			if !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("message %q does not contain %q", e.Error.Message, tt.message)
			}
			if len(script.Requests()) != 0 || len(s.Rejected()) != 1 {
				t.Errorf("refused request reached the script (%d) or was not listed (%d)", len(script.Requests()), len(s.Rejected()))
			}
		})
	}
}

// TestSignatureCheck: a thinking block the fake signed must come back with
// the same text.
func TestSignatureCheck(t *testing.T) {
	script := &fakellm.Script{}
	s := New(t, script)
	script.Push(fakellm.Reply{Thinking: "plan", Text: "a"})
	status, _, body := post(t, s, req(`[`+hi+`]`, `"stream":true`), nil)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	sig := s.sign("plan", "")
	if !strings.Contains(body, sig) {
		t.Fatalf("stream lacks the signature %q", sig)
	}
	replay := func(text string) int {
		status, _, _ := post(t, s, req(`[`+hi+`,{"role":"assistant","content":[{"type":"thinking","thinking":"`+text+`","signature":"`+sig+`"},{"type":"text","text":"a"}]},`+hi+`]`), nil)
		return status
	}
	if got := replay("plan"); got != 200 {
		t.Errorf("verbatim replay refused: %d", got)
	}
	if got := replay("plan B"); got != 400 {
		t.Errorf("altered replay accepted: %d", got)
	}
}

// TestStreamEvents checks the event sequence of a full answer.
func TestStreamEvents(t *testing.T) {
	script := &fakellm.Script{}
	s := New(t, script)
	script.Push(fakellm.Reply{RedactedThinking: "opaque", Thinking: "think", Text: "hello", ToolCalls: []fakellm.Call{{ID: "toolu_1", Name: "read_file", Args: `{"path":"a.md"}`}}, Chunk: 4})
	status, header, body := post(t, s, req(`[`+hi+`]`, `"stream":true`), nil)
	if status != 200 || header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content type %q", status, header.Get("Content-Type"))
	}
	var events []string
	var deltaTypes []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"content_block_delta"`) {
			var ev struct{ Delta struct{ Type string } }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("bad delta %s: %v", data, err)
			}
			deltaTypes = append(deltaTypes, ev.Delta.Type)
		}
	}
	compact := func(xs []string) []string { // collapse runs
		var out []string
		for _, x := range xs {
			if len(out) == 0 || out[len(out)-1] != x {
				out = append(out, x)
			}
		}
		return out
	}
	wantEvents := []string{"message_start", "ping",
		"content_block_start", "content_block_stop", // redacted_thinking
		"content_block_start", "content_block_delta", "content_block_stop", // thinking
		"content_block_start", "content_block_delta", "content_block_stop", // text
		"content_block_start", "content_block_delta", "content_block_stop", // tool_use
		"message_delta", "message_stop"}
	if got := compact(events); !reflect.DeepEqual(got, wantEvents) {
		t.Errorf("events = %v\nwant %v", got, wantEvents)
	}
	wantDeltas := []string{"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
	if got := compact(deltaTypes); !reflect.DeepEqual(got, wantDeltas) {
		t.Errorf("delta types = %v, want %v", got, wantDeltas)
	}
	if !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Errorf("message_delta lacks stop_reason tool_use")
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name   string
		reply  fakellm.Reply
		status int
		check  func(t *testing.T, header http.Header, body string)
	}{
		{"overloaded with retry-after", fakellm.Reply{Status: 529, RetryAfter: "3", RetryAfterMS: "2500"}, 529, func(t *testing.T, h http.Header, body string) {
			if h.Get("retry-after") != "3" || h.Get("retry-after-ms") != "2500" || !strings.Contains(body, `"overloaded_error"`) {
				t.Errorf("headers %v body %s", h, body)
			}
		}},
		{"truncated", fakellm.Reply{Text: "abc", Truncate: true}, 200, func(t *testing.T, _ http.Header, body string) {
			if strings.Contains(body, "message_stop") || strings.Contains(body, "message_delta") || strings.Contains(body, "content_block_stop") {
				t.Errorf("truncated stream has an end: %s", body)
			}
		}},
		{"mid-stream error", fakellm.Reply{Text: "abc", MidStreamError: "overloaded_error"}, 200, func(t *testing.T, _ http.Header, body string) {
			if !strings.Contains(body, "event: error\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"},\"type\":\"error\"}") || strings.Contains(body, "message_stop") {
				t.Errorf("body %s", body)
			}
		}},
		{"garbage", fakellm.Reply{Text: "abc", Garbage: true}, 200, func(t *testing.T, _ http.Header, body string) {
			if !strings.Contains(body, `"text":`+"\n") {
				t.Errorf("no broken event in %s", body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := &fakellm.Script{}
			s := New(t, script)
			script.Push(tt.reply)
			status, header, body := post(t, s, req(`[`+hi+`]`, `"stream":true`), nil)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			tt.check(t, header, body)
		})
	}
}

func TestNonStreamingAndModels(t *testing.T) {
	script := &fakellm.Script{}
	s := New(t, script, WithModels("claude-x"))
	script.Push(fakellm.Reply{Thinking: "t", Text: "hello", ToolCalls: []fakellm.Call{{ID: "toolu_1", Name: "x", Args: `{"a":1}`}}})
	status, _, body := post(t, s, req(`[`+hi+`]`), nil)
	var msg struct {
		Type       string
		StopReason string `json:"stop_reason"`
		Content    []map[string]any
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || status != 200 {
		t.Fatalf("status %d body %s: %v", status, body, err)
	}
	if msg.Type != "message" || msg.StopReason != "tool_use" || len(msg.Content) != 3 || msg.Content[1]["text"] != "hello" || msg.Content[0]["signature"] == "" {
		t.Errorf("message = %+v", msg)
	}

	get := func(key, version string) (int, string) {
		r, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/models", nil)
		r.Header.Set("x-api-key", key)
		r.Header.Set("anthropic-version", version)
		resp, err := s.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if status, body := get(APIKey, "2023-06-01"); status != 200 || !strings.Contains(body, `"id":"claude-x"`) {
		t.Errorf("models: %d %s", status, body)
	}
	if status, _ := get("wrong", "2023-06-01"); status != 401 {
		t.Errorf("models without key: %d", status)
	}
	if status, body := get(APIKey, ""); status != 400 || !strings.Contains(body, "anthropic-version") {
		t.Errorf("models without version: %d %s", status, body)
	}
}
