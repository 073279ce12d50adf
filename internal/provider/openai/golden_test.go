package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// pngBytes stands in for an image; the adapter only base64-encodes it.
var pngBytes = []byte("\x89PNG\r\n\x1a\nfake")

func call(id, name, args string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}
}

func toolResult(id, name, content string, isErr bool, images ...llm.Image) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: id, Name: name, Content: llm.PlainContent(content), IsError: isErr, Images: images}}
}

// history exercises every conversion rule: images by data and URL, an image
// nobody loaded, a file reference, thinking (never sent), a call whose
// arguments failed to parse, a call without a result, a result without a
// call, images returned by a tool, stray tool messages and a thinking-only
// assistant message.
func history() llm.Request {
	return llm.Request{
		Model:     "gpt-4o",
		System:    "You are nanobot, a helpful assistant.",
		MaxTokens: 4096,
		Tools: []llm.ToolSpec{{
			Name: "read_file", Description: "Read a file in the workspace.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.Text("What is in this picture, and what do my notes say?"),
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: pngBytes}},
				{Kind: llm.PartImage, Image: &llm.Image{URL: "https://example.com/cat.jpg"}},
				{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "media/notes.pdf", MIME: "application/pdf", Size: 48213, Name: "notes.pdf"}},
				{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: "media/unloaded.png"}},
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartThinking, Text: "SECRET-THOUGHT: read the notes first.", Signature: "sig"},
				llm.Text("Let me check."),
				call("call_1", "read_file", `{"path":"media/notes.pdf"}`),
				{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_2", Name: "exec", RawArgs: `{"command": "ls`, ParseError: "arguments are not valid JSON: unexpected end of JSON input"}},
				call("call_3", "list_dir", `{"path":"."}`),
				call("call_4", "screenshot", `{}`),
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				toolResult("call_4", "screenshot", "captured the screen", false, llm.Image{MIME: "image/png", Data: pngBytes}),
				toolResult("call_1", "read_file", "Meeting with Ana at 10:00.", false),
				toolResult("call_99", "read_file", "a result from a call that is not in the history", false),
				toolResult("call_2", "exec", "arguments are not valid JSON: unexpected end of JSON input", true),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("The picture shows a cat; your notes say you meet Ana at 10:00.")}},
			{Role: llm.RoleTool, Parts: []llm.Part{toolResult("call_1", "read_file", "a duplicate, stray result", false)}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Thanks!"), llm.Text("Anything else?")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartThinking, Text: "SECRET-THOUGHT: nothing to add."}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Hello?")}},
		},
	}
}

func reasoningRequest() llm.Request {
	temp := 0.2
	return llm.Request{
		Model: "o3-mini", System: "Be brief.", MaxTokens: 2048, Temperature: &temp, ReasoningEffort: "medium",
		Tools: []llm.ToolSpec{{Name: "save_memory", Description: "Save a fact.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}}}`)}},
		ForceTool: "save_memory",
		Messages:  []llm.Message{llm.NewText(llm.RoleUser, "Remember that I like tea.")},
	}
}

// TestRequestGolden sends each request through the strict fake (which must
// accept it) and compares the exact payload with testdata/<name>.json.
func TestRequestGolden(t *testing.T) {
	cases := []struct {
		name  string
		req   llm.Request
		check func(t *testing.T, got fakellm.Request)
	}{
		{"history", history(), checkHistory},
		{"reasoning_model", reasoningRequest(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := openaifake.New(t, nil)
			p := newProvider(t, fake, nil)
			mustOK(t, collect(t, p.Stream(context.Background(), tc.req)))
			if rej := fake.Rejected(); len(rej) > 0 {
				t.Fatalf("fake rejected the payload: %+v", rej)
			}
			got := fake.Script().Requests()[0]
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got.Raw, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden.Check(t, filepath.Join("testdata", tc.name+".json"), pretty.Bytes())
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// checkHistory states the rules the golden file shows, so a careless
// -update cannot bless a regression.
func checkHistory(t *testing.T, got fakellm.Request) {
	t.Helper()
	raw := string(got.Raw)
	if strings.Contains(raw, "SECRET-THOUGHT") {
		t.Error("thinking was sent")
	}
	if strings.Contains(raw, "call_99") || strings.Contains(raw, "stray result") {
		t.Error("an orphan tool result was sent")
	}
	var roles []string
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	want := []string{"user", "assistant", "tool", "tool", "tool", "tool", "user", "assistant", "user", "user"}
	if !slices.Equal(roles, want) {
		t.Fatalf("roles = %v, want %v", roles, want)
	}
	var ids, contents []string
	for _, m := range got.Messages[2:6] {
		ids = append(ids, m.ToolResults[0].CallID)
		contents = append(contents, m.ToolResults[0].Content)
	}
	if !slices.Equal(ids, []string{"call_1", "call_2", "call_3", "call_4"}) {
		t.Errorf("tool results out of call order: %v", ids)
	}
	if contents[2] != "Error: no result recorded for this tool call." {
		t.Errorf("missing result became %q", contents[2])
	}
	if contents[1] != "Error: arguments are not valid JSON: unexpected end of JSON input" {
		t.Errorf("error result = %q", contents[1])
	}
	// See docs/reliability.md#every-turn-ends-with-something-to-read. Servers
	// that parse arguments refuse the raw text; the error result above tells
	// the model what was wrong.
	if args := got.Messages[1].ToolCalls[1].Args; args != `{}` {
		t.Errorf("parse-error call sent arguments %q, want {}", args)
	}
	if m := got.Messages[0]; m.Images != 2 || !strings.Contains(m.Text, "[file: notes.pdf (application/pdf, 47.1 KiB) at media/notes.pdf]") ||
		!strings.Contains(m.Text, "[image not sent: media/unloaded.png was not loaded]") {
		t.Errorf("first user message = %+v", m)
	}
	if m := got.Messages[6]; m.Images != 1 || !strings.Contains(m.Text, "screenshot (call call_4)") {
		t.Errorf("tool images message = %+v", m)
	}
	if got.Messages[8].Text != "Thanks!\nAnything else?" {
		t.Errorf("text parts joined as %q", got.Messages[8].Text)
	}
}
