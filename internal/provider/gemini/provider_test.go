package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
)

func TestStreamText(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{Text: "Hello from the fake Gemini.", InputTokens: 120, OutputTokens: 9, CachedTokens: 100})
	res := run(t, f.p, context.Background(), llm.Request{Model: testModel, System: "be brief", Messages: []llm.Message{userText("hi")}})
	if res.err != nil {
		t.Fatal(res.err)
	}
	noRejections(t, f.srv)
	if got := res.msg.Text(); got != "Hello from the fake Gemini." {
		t.Errorf("text = %q", got)
	}
	m := res.msg.Meta
	if m.API != API || m.Provider != "gemini" || m.Model != testModel || m.StopReason != llm.StopEnd {
		t.Errorf("meta = %+v", m)
	}
	if want := (llm.Usage{InputTokens: 20, OutputTokens: 9, CacheReadTokens: 100}); m.Usage != want {
		t.Errorf("usage = %+v, want %+v", m.Usage, want)
	}
	req := f.script.Requests()[0]
	if req.System != "be brief" || req.Model != testModel || req.Header.Get("x-goog-api-key") != geminifake.APIKey {
		t.Errorf("request system %q model %q", req.System, req.Model)
	}
	if strings.Contains(req.Path, "key=") {
		t.Errorf("the key travels in the URL: %s", req.Path)
	}
}

// A reply with thinking and two parallel calls, then the next request of the
// tool loop: the strict fake checks the first call's signature comes back,
// the two results come as one user turn in call order, and the thought
// summary is replayed as a thought.
func TestToolLoopReplaysSignatures(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{
		Thinking:  "I should read the notes and list the folder.",
		ToolCalls: []fakellm.Call{{Name: "read_file", Args: `{"path":"notes.md"}`}, {Name: "list_dir", Args: `{"path":"."}`}},
	}, fakellm.Reply{Thinking: "Done.", Text: "Your notes say buy milk."})
	tools := []llm.ToolSpec{
		{Name: "read_file", Description: "read", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)},
		{Name: "list_dir", Description: "list", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	}
	req := llm.Request{Model: testModel, Tools: tools, ThinkingBudget: 2048, Messages: []llm.Message{userText("what do my notes say?")}}
	first := run(t, f.p, context.Background(), req)
	if first.err != nil {
		t.Fatal(first.err)
	}
	calls := first.msg.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "read_file" || string(calls[0].Arguments) != `{"path":"notes.md"}` || calls[0].ID == calls[1].ID {
		t.Fatalf("calls = %+v", calls)
	}
	var signed []string
	for _, p := range first.msg.Parts {
		if p.Kind == llm.PartToolCall {
			signed = append(signed, p.Signature)
		}
	}
	if signed[0] == "" || signed[1] != "" {
		t.Fatalf("call signatures = %q, want the first signed only (as Gemini sends them)", signed)
	}
	if first.msg.Parts[0].Kind != llm.PartThinking || first.msg.Parts[0].Text != "I should read the notes and list the folder." {
		t.Errorf("first part = %+v, want the thought summary", first.msg.Parts[0])
	}
	if first.msg.Meta.Usage.ReasoningTokens == 0 {
		t.Errorf("usage %+v has no thoughts", first.msg.Meta.Usage)
	}

	results := llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
		{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: calls[0].ID, Name: "read_file", Content: llm.PlainContent("buy milk")}},
		{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: calls[1].ID, Name: "list_dir", Content: llm.PlainContent("no such dir"), IsError: true}},
	}}
	req.Messages = append(req.Messages, first.msg, results)
	second := run(t, f.p, context.Background(), req)
	if second.err != nil {
		t.Fatal(second.err)
	}
	noRejections(t, f.srv)
	if second.msg.Text() != "Your notes say buy milk." {
		t.Errorf("answer = %q", second.msg.Text())
	}
	// The answer without calls carries its signature on an empty part.
	last := second.msg.Parts[len(second.msg.Parts)-1]
	if last.Kind != llm.PartThinking || last.Text != "" || last.Signature == "" {
		t.Errorf("last part = %+v, want a thinking part holding the signature", last)
	}
	sent := f.script.Requests()[1]
	if len(sent.Messages) != 3 {
		t.Fatalf("second request has %d turns, want user, model, user", len(sent.Messages))
	}
	model, user := sent.Messages[1], sent.Messages[2]
	if model.Thinking != "I should read the notes and list the folder." || len(model.ToolCalls) != 2 {
		t.Errorf("model turn = %+v", model)
	}
	want := []fakellm.Result{{CallID: "read_file", Content: "buy milk"}, {CallID: "list_dir", Content: "no such dir", IsError: true}}
	if !slices.Equal(user.ToolResults, want) {
		t.Errorf("results = %+v, want %+v", user.ToolResults, want)
	}
	if sent.ThinkingBudget != 2048 {
		t.Errorf("thinking budget = %d", sent.ThinkingBudget)
	}
}

// A tool loop another provider began (a fallback mid-turn) has unsigned
// calls: they get the documented stand-in signature; Anthropic's thinking
// and its signature are not sent to Gemini.
func TestForeignHistory(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{Text: "Gemini carries on."})
	history := []llm.Message{
		userText("first question"),
		{Role: llm.RoleAssistant, Meta: &llm.Meta{API: "anthropic"}, Parts: []llm.Part{
			{Kind: llm.PartThinking, Text: "claude thinks", Signature: "claude-sig"},
			llm.Text("Claude answered."),
		}},
		userText("now read my notes"),
		{Role: llm.RoleAssistant, Meta: &llm.Meta{API: "openai"}, Parts: []llm.Part{
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}},
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_2", Name: "read_file", RawArgs: "{bad", ParseError: "bad"}},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_2", Name: "read_file", Content: llm.PlainContent("Error: bad arguments"), IsError: true}},
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_9", Name: "read_file", Content: llm.PlainContent("orphan")}},
		}},
	}
	res := run(t, f.p, context.Background(), llm.Request{Model: testModel, Messages: history})
	if res.err != nil {
		t.Fatal(res.err)
	}
	noRejections(t, f.srv)
	sent := f.script.Requests()[0]
	if len(sent.Messages) != 5 {
		t.Fatalf("turns = %d: %+v", len(sent.Messages), sent.Messages)
	}
	if sent.Messages[1].Thinking != "" || strings.Contains(string(sent.Raw), "claude-sig") {
		t.Errorf("Anthropic thinking replayed to Gemini: %s", sent.Raw)
	}
	if !strings.Contains(string(sent.Raw), `"thoughtSignature":"`+skipSignature+`"`) {
		t.Errorf("the unsigned call of the current turn has no stand-in signature: %s", sent.Raw)
	}
	got := sent.Messages[4].ToolResults
	if len(got) != 2 || !got[0].IsError || !strings.HasPrefix(got[0].Content, "no result recorded") || got[1].Content != "Error: bad arguments" {
		t.Errorf("results = %+v, want a synthetic error for call_1, then call_2's own", got)
	}
}

func TestImagesAndOddHistories(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	tests := []struct {
		name    string
		history []llm.Message
		turns   int
		images  int
	}{
		{"image inline", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("what is this?"),
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: png}},
			{Kind: llm.PartImage, Image: &llm.Image{URL: "https://example.com/x.png"}}}}}, 1, 1},
		{"starts with the model", []llm.Message{llm.NewText(llm.RoleAssistant, "earlier answer"), userText("hi")}, 3, 0},
		{"ends with the model", []llm.Message{userText("hi"), llm.NewText(llm.RoleAssistant, "partial")}, 3, 0},
		{"consecutive user messages merged", []llm.Message{userText("one"), userText("two")}, 1, 0},
		{"tool images after the responses", []llm.Message{userText("look"),
			{Role: llm.RoleAssistant, Meta: &llm.Meta{API: "openai"}, Parts: []llm.Part{{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "c", Name: "shot"}}}},
			{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "c", Name: "shot",
				Images: []llm.Image{{MIME: "image/png", Data: png}}}}}}}, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res := run(t, f.p, context.Background(), llm.Request{Model: testModel, Messages: tt.history})
			if res.err != nil {
				t.Fatal(res.err)
			}
			noRejections(t, f.srv)
			sent := f.script.Requests()[0]
			images := 0
			for _, m := range sent.Messages {
				images += m.Images
			}
			if len(sent.Messages) != tt.turns || images != tt.images {
				t.Errorf("turns %d images %d, want %d and %d: %s", len(sent.Messages), images, tt.turns, tt.images, sent.Raw)
			}
		})
	}
}

func TestForcedTool(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "save_memory", Args: `{"history_entry":"x"}`}}})
	res := run(t, f.p, context.Background(), llm.Request{Model: testModel, ForceTool: "save_memory", MaxTokens: 500,
		Tools: []llm.ToolSpec{{Name: "save_memory", Parameters: json.RawMessage(`{"type":"object"}`)}}, Messages: []llm.Message{userText("x")}})
	if res.err != nil {
		t.Fatal(res.err)
	}
	noRejections(t, f.srv)
	if req := f.script.Requests()[0]; req.ToolChoice != "save_memory" || req.MaxTokens != 500 {
		t.Errorf("tool choice %q max tokens %d", req.ToolChoice, req.MaxTokens)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name   string
		reply  fakellm.Reply
		key    string
		check  func(t *testing.T, err error)
		status int
	}{
		{name: "429 with RetryInfo", reply: fakellm.Reply{Status: 429, RetryAfterMS: "1500"}, status: 429,
			check: func(t *testing.T, err error) {
				api := asAPI(t, err)
				if api.RetryAfter != 1500*time.Millisecond || api.Type != "RESOURCE_EXHAUSTED" || !api.Retryable() {
					t.Errorf("err = %+v", api)
				}
			}},
		{name: "503 with Retry-After", reply: fakellm.Reply{Status: 503, RetryAfter: "3"}, status: 503,
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); api.RetryAfter != 3*time.Second || !api.Retryable() {
					t.Errorf("err = %+v", api)
				}
			}},
		{name: "400 invalid argument", reply: fakellm.Reply{Status: 400, ErrorMessage: "bad"}, status: 400,
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); api.Retryable() || api.Auth() {
					t.Errorf("err = %+v", api)
				}
			}},
		{name: "wrong key", key: "AIzaWrongKey-do-not-log", status: 400,
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); !api.Auth() || api.Type != "API_KEY_INVALID" || strings.Contains(err.Error(), "do-not-log") {
					t.Errorf("err = %v (%+v)", err, api)
				}
			}},
		{name: "no key", key: "-", status: 403,
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); !api.Auth() {
					t.Errorf("err = %+v", api)
				}
			}},
		{name: "stream cut mid-way", reply: fakellm.Reply{Text: "half an answ", Truncate: true},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrTruncated) {
					t.Errorf("err = %v", err)
				}
			}},
		{name: "error inside the stream", reply: fakellm.Reply{Text: "some", MidStreamError: "UNAVAILABLE"}, status: 503,
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); !api.Retryable() || api.Type != "UNAVAILABLE" {
					t.Errorf("err = %+v", api)
				}
			}},
		{name: "garbage chunk", reply: fakellm.Reply{Text: "some text", Garbage: true},
			check: func(t *testing.T, err error) {
				if api := asAPI(t, err); !api.Retryable() || api.Type != "invalid_stream" {
					t.Errorf("err = %+v", api)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.ProviderConfig) {
				switch tt.key {
				case "":
				case "-":
					c.APIKey = ""
				default:
					c.APIKey = tt.key
				}
			})
			if tt.key == "" {
				f.script.Push(tt.reply)
			}
			res := run(t, f.p, context.Background(), ask("hi"))
			if res.err == nil {
				t.Fatalf("no error; message %+v", res.msg)
			}
			var api *llm.APIError
			if errors.As(res.err, &api) && api.Status != tt.status {
				t.Errorf("status = %d, want %d", api.Status, tt.status)
			}
			tt.check(t, res.err)
		})
	}
}

func asAPI(t *testing.T, err error) *llm.APIError {
	t.Helper()
	var api *llm.APIError
	if !errors.As(err, &api) {
		t.Fatalf("err = %v, want an *llm.APIError", err)
	}
	return api
}

func TestMalformedFunctionCallEndsTheAnswer(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "read_file", Args: `{"path": notes`}}})
	res := run(t, f.p, context.Background(), ask("hi"))
	if res.err != nil || res.msg.Meta.StopReason != llm.StopMalformedCall || len(res.msg.ToolCalls()) != 0 {
		t.Errorf("err %v, message %+v", res.err, res.msg)
	}
}

func TestCancelStopsTheCall(t *testing.T) {
	f := newFixture(t)
	f.script.Push(fakellm.Reply{Text: strings.Repeat("slow ", 50), ChunkDelay: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	for d := range f.p.Stream(ctx, ask("hi")) {
		n++
		if d.Kind == llm.DeltaText {
			cancel()
		}
		if d.Kind == llm.DeltaError && !errors.Is(d.Err, context.Canceled) {
			t.Errorf("terminal = %v, want the cancellation", d.Err)
		}
	}
	cancel()
	if n == 0 {
		t.Fatal("no deltas")
	}
}

func TestModels(t *testing.T) {
	f := newFixture(t)
	ids, err := f.p.Models(context.Background())
	if err != nil || !slices.Contains(ids, "gemini-2.5-flash") {
		t.Fatalf("ids %v err %v", ids, err)
	}
	bad := newFixture(t, func(c *config.ProviderConfig) { c.APIKey = "AIzaWrong" })
	if _, err := bad.p.Models(context.Background()); err == nil || !asAPI(t, err).Auth() {
		t.Errorf("wrong key: %v", err)
	}
}

func TestAPIRoot(t *testing.T) {
	for in, want := range map[string]string{
		"https://generativelanguage.googleapis.com": "https://generativelanguage.googleapis.com/v1beta",
		"https://proxy.example/":                    "https://proxy.example/v1beta",
		"https://proxy.example/gemini/v1":           "https://proxy.example/gemini/v1",
		"http://127.0.0.1:8080/v1beta/":             "http://127.0.0.1:8080/v1beta",
	} {
		if got := apiRoot(in); got != want {
			t.Errorf("apiRoot(%q) = %q, want %q", in, got, want)
		}
	}
}
