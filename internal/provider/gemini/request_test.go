package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// History builders: short names keep the tables readable.

func assistant(api string, parts ...llm.Part) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: parts, Meta: &llm.Meta{Provider: api, API: api, Model: "m"}}
}

func call(id, name, args string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}
}

func signed(p llm.Part, sig string) llm.Part { p.Signature = sig; return p }

func result(id, name, text string) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: id, Name: name, Content: llm.PlainContent(text)}}
}

func tool(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleTool, Parts: parts} }

var testTools = []llm.ToolSpec{
	{Name: "read_file", Description: "Read a file in the workspace.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
	{Name: "list_dir", Description: "List a directory.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	{Name: "now", Description: "The time."},
}

var pngPixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// TestRenderGolden keeps the exact body sent for each kind of history in
// testdata/<name>.json (go test -run TestRenderGolden -update rewrites
// them). Each body is also sent to the strict fake, which must accept it;
// signatures are ones the fake would not know, so histories here carry only
// the documented stand-in or none.
func TestRenderGolden(t *testing.T) {
	const stand = skipSignature
	geminiTurn := assistant(API,
		llm.Part{Kind: llm.PartThinking, Text: "Read and list."},
		signed(call("gcall_1", "read_file", `{"path":"notes.md"}`), stand),
		call("gcall_2", "list_dir", `{"path":"."}`))
	tests := []struct {
		name string
		req  llm.Request
	}{
		{"parallel_calls_results_in_one_user_turn", llm.Request{System: "You are nanobot.", Tools: testTools, Messages: []llm.Message{
			llm.NewText(llm.RoleUser, "what is in my notes?"), geminiTurn,
			tool(result("gcall_2", "list_dir", "notes.md"), result("gcall_1", "read_file", "buy milk")),
		}}},
		{"foreign_tool_loop_gets_the_stand_in_signature", llm.Request{Tools: testTools, Messages: []llm.Message{
			llm.NewText(llm.RoleUser, "read it"),
			assistant("anthropic", llm.Part{Kind: llm.PartThinking, Text: "claude thinks", Signature: "claude-sig"},
				llm.Text("Reading."), call("toolu_1", "read_file", `{"path":"a"}`)),
			tool(result("toolu_1", "read_file", "")),
			assistant("openai", call("call_1", "list_dir", `{"path":"."}`), call("call_2", "now", `not json`)),
		}}},
		{"earlier_turns_sent_as_stored", llm.Request{Messages: []llm.Message{
			llm.NewText(llm.RoleUser, "first"),
			assistant("openai", call("call_1", "now", `{}`)), tool(result("call_1", "now", "noon")),
			assistant("openai", llm.Text("It is noon.")),
			llm.NewText(llm.RoleUser, "thanks"),
		}}},
		{"images_and_files", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			llm.Text("what is this?"),
			{Kind: llm.PartImage, Image: &llm.Image{Data: pngPixel}},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/gif", Data: []byte("GIF89a")}},
			{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "inbox/a.pdf", Name: "a.pdf", MIME: "application/pdf", Size: 2048}},
		}}}}},
		{"starts_and_ends_with_the_model", llm.Request{Messages: []llm.Message{
			llm.NewText(llm.RoleAssistant, "earlier"), llm.NewText(llm.RoleUser, "hi"), llm.NewText(llm.RoleAssistant, "partial"),
		}}},
		{"options_and_forced_tool", llm.Request{Tools: testTools, ForceTool: "now", MaxTokens: 1000, Temperature: new(0.2),
			ThinkingBudget: 2048, Messages: []llm.Message{llm.NewText(llm.RoleUser, "time?")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.req.Model = testModel
			body, err := f.p.request(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden.Check(t, filepath.Join("testdata", tt.name+".json"), pretty.Bytes())
			if res := run(t, f.p, context.Background(), tt.req); res.err != nil {
				t.Fatal(res.err)
			}
			noRejections(t, f.srv)
		})
	}
}

// The results of one turn may be stored as one tool message
// (docs/history.md#projection) or, in older sessions, one per result and in
// completion order; Gemini gets the same single user turn.
func TestRenderSameBodyForEquivalentHistories(t *testing.T) {
	f := newFixture(t)
	base := []llm.Message{llm.NewText(llm.RoleUser, "q"), assistant("openai", call("a", "now", `{}`), call("b", "now", `{}`))}
	one := append(append([]llm.Message{}, base...), tool(result("a", "now", "1"), result("b", "now", "2")))
	split := append(append([]llm.Message{}, base...), tool(result("b", "now", "2")), tool(result("a", "now", "1")))
	a, err := f.p.request(llm.Request{Model: testModel, Messages: one})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.p.request(llm.Request{Model: testModel, Messages: split})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("payloads differ:\n%s\n%s", a, b)
	}
}

func TestRenderRefusesEmptyRequests(t *testing.T) {
	for name, req := range map[string]llm.Request{
		"no model":        {Messages: []llm.Message{userText("hi")}},
		"no messages":     {Model: testModel},
		"only blank text": {Model: testModel, Messages: []llm.Message{userText("  ")}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			res := run(t, f.p, context.Background(), req)
			if res.err == nil || len(f.script.Requests()) != 0 || len(f.srv.Rejected()) != 0 {
				t.Errorf("err %v; %d requests reached the server", res.err, len(f.script.Requests())+len(f.srv.Rejected()))
			}
		})
	}
}
