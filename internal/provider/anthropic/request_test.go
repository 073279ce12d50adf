package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// History builders: short names keep the tables readable.

func assistant(api string, parts ...llm.Part) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: parts, Meta: &llm.Meta{Provider: api, API: api, Model: "m"}}
}

func call(id, name, args string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}
}

func result(id, name, text string) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: id, Name: name, Content: llm.PlainContent(text)}}
}

func errResult(id, name, text string) llm.Part {
	p := result(id, name, text)
	p.Result.IsError = true
	return p
}

func tool(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleTool, Parts: parts} }

func user(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: parts} }

var testTools = []llm.ToolSpec{
	{Name: "read_file", Description: "Read a file in the workspace.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "list_dir", Description: "List a directory.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	{Name: "exec", Description: "Run a shell command.", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
}

// threeCalls is one model turn that called three tools; threeResults holds
// its results as one tool message (docs/history.md#projection). The OpenAI
// adapter sends this as three role "tool" messages; Anthropic needs one user
// message.
var (
	threeCalls = assistant("anthropic", llm.Text("Let me look around."),
		call("toolu_a", "read_file", `{"path":"notes.md"}`),
		call("toolu_b", "list_dir", `{"path":"."}`),
		call("toolu_c", "exec", `{"command":"date"}`))
	resultA = result("toolu_a", "read_file", "# Notes\n- buy milk")
	resultB = result("toolu_b", "list_dir", "notes.md\nmemory/")
	resultC = errResult("toolu_c", "exec", "exit status 1: date: command not allowed")
)

var pngPixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// TestRender sends neutral histories through the adapter to the strict fake:
// every request must be accepted, its payload matches a golden file
// (go test -run TestRender -update rewrites them), and check looks at what
// the fake understood.
func TestRender(t *testing.T) {
	tests := []struct {
		name  string
		req   llm.Request
		check func(t *testing.T, got fakellm.Request)
	}{
		{
			name: "tool_results_one_user_message",
			req: llm.Request{System: "You are nanobot.", Tools: testTools, Messages: []llm.Message{
				userText("what is in my notes?"), threeCalls, tool(resultA, resultB, resultC),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				wantResults(t, got.Messages[2], "toolu_a", "toolu_b", "toolu_c")
				if !got.Messages[2].ToolResults[2].IsError {
					t.Errorf("exec result lost its is_error flag")
				}
				if got.System != "You are nanobot." {
					t.Errorf("system = %q", got.System)
				}
			},
		},
		{
			name: "results_around_user_text",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("read notes.md"),
				assistant("anthropic", call("toolu_a", "read_file", `{"path":"notes.md"}`)),
				userText("and be quick"), // arrived while the tool ran
				tool(resultA),
				userText("thanks"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				wantResults(t, got.Messages[2], "toolu_a")
				if got.Messages[2].Text != "and be quick\nthanks" {
					t.Errorf("user text after the results = %q", got.Messages[2].Text)
				}
			},
		},
		{
			name: "starts_with_assistant",
			req: llm.Request{Messages: []llm.Message{
				assistant("anthropic", llm.Text("Earlier I said hello.")), userText("and now?"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				if got.Messages[0].Text != placeholderFirst {
					t.Errorf("first message = %q, want the placeholder", got.Messages[0].Text)
				}
			},
		},
		{
			name: "ends_with_assistant",
			req: llm.Request{Messages: []llm.Message{
				userText("hi"), assistant("anthropic", llm.Text("Hello!")),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				if got.Messages[2].Text != placeholderLast {
					t.Errorf("last message = %q, want the placeholder", got.Messages[2].Text)
				}
			},
		},
		{
			name: "missing_result",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("look"),
				assistant("anthropic", call("toolu_a", "read_file", `{"path":"a"}`), call("toolu_b", "list_dir", `{}`)),
				tool(result("toolu_b", "list_dir", "a")),
				userText("well?"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				wantResults(t, got.Messages[2], "toolu_a", "toolu_b")
				r := got.Messages[2].ToolResults[0]
				if !r.IsError || r.Content != missingResult {
					t.Errorf("synthetic result = %+v", r)
				}
			},
		},
		{
			name: "interrupted_turn_at_the_end",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("look"), assistant("anthropic", call("toolu_a", "read_file", `{"path":"a"}`)),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				wantResults(t, got.Messages[2], "toolu_a")
			},
		},
		{
			name: "orphan_result_dropped",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("first"),
				tool(result("toolu_gone", "read_file", "from a cut-off turn")),
				userText("second"),
				assistant("anthropic", call("toolu_a", "read_file", `{"path":"a"}`)),
				tool(resultA, result("toolu_zz", "exec", "answers nothing")),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				if got.Messages[0].Text != "first\nsecond" || len(got.Messages[0].ToolResults) != 0 {
					t.Errorf("first message = %+v, want the two texts without the orphan", got.Messages[0])
				}
				wantResults(t, got.Messages[2], "toolu_a")
			},
		},
		{
			name: "consecutive_same_roles_merged",
			req: llm.Request{Messages: []llm.Message{
				userText("one"), userText("two"),
				user(llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: pngPixel}}),
				assistant("anthropic", llm.Text("first part")), assistant("anthropic", llm.Text("second part")),
				userText("three"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user")
				if got.Messages[0].Text != "one\ntwo" || got.Messages[0].Images != 1 {
					t.Errorf("merged user message = %+v", got.Messages[0])
				}
				if got.Messages[1].Text != "first part\nsecond part" {
					t.Errorf("merged assistant message = %q", got.Messages[1].Text)
				}
			},
		},
		{
			name: "unparsed_arguments_replayed_as_empty_object",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("run it"),
				assistant("anthropic", llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "toolu_a", Name: "exec",
					RawArgs: `{"command": "ls`, ParseError: "arguments are not valid JSON: unexpected end of JSON input"}}),
				tool(errResult("toolu_a", "exec", "invalid arguments: arguments are not valid JSON: unexpected end of JSON input; send one JSON object")),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				if args := got.Messages[1].ToolCalls[0].Args; args != "{}" {
					t.Errorf("replayed input = %s, want {}", args)
				}
			},
		},
		{
			name: "images_and_files",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				user(llm.Text("what are these?"),
					llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: pngPixel}},
					llm.Part{Kind: llm.PartImage, Image: &llm.Image{Data: pngPixel}}, // type sniffed
					llm.Part{Kind: llm.PartImage, Image: &llm.Image{URL: "https://example.com/cat.jpg"}},
					llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/bmp", Data: []byte("BM....")}},
					llm.Part{Kind: llm.PartImage, Image: &llm.Image{Path: "media/photo.jpg"}},
					llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "media/report.pdf", Name: "report.pdf", MIME: "application/pdf", Size: 48213}}),
				assistant("anthropic", call("toolu_a", "read_file", `{"path":"media/chart.png"}`)),
				tool(llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "toolu_a", Name: "read_file",
					Images: []llm.Image{{MIME: "image/png", Data: pngPixel}}}}),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.Messages[0].Images != 3 {
					t.Errorf("user images = %d, want 3 (png, sniffed png, url)", got.Messages[0].Images)
				}
				if got.Messages[2].Images != 1 {
					t.Errorf("tool result images = %d, want 1", got.Messages[2].Images)
				}
			},
		},
		{
			name: "system_messages_hoisted",
			req: llm.Request{System: "You are nanobot.", Messages: []llm.Message{
				llm.NewText(llm.RoleSystem, "The user prefers short answers."), userText("hi"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user")
				if got.System != "You are nanobot.\nThe user prefers short answers." {
					t.Errorf("system = %q", got.System)
				}
			},
		},
		{
			name: "thinking_only_replayed_to_anthropic",
			req: llm.Request{Messages: []llm.Message{
				userText("q1"),
				assistant("openai", llm.Part{Kind: llm.PartThinking, Text: "openai reasoning"}, llm.Text("a1")),
				userText("q2"),
				assistant("anthropic",
					llm.Part{Kind: llm.PartThinking, Text: "EmwKAhgB", Redacted: true},
					llm.Part{Kind: llm.PartThinking, Text: "signed reasoning", Signature: "sig-1"},
					llm.Part{Kind: llm.PartThinking, Text: "unsigned reasoning"},
					llm.Text("a2")),
				userText("q3"),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user", "assistant", "user")
				if got.Messages[1].Thinking != "" {
					t.Errorf("openai thinking replayed: %q", got.Messages[1].Thinking)
				}
				if got.Messages[3].Thinking != "signed reasoning" || got.Messages[3].RedactedThinking != 1 {
					t.Errorf("anthropic thinking = %q, redacted %d", got.Messages[3].Thinking, got.Messages[3].RedactedThinking)
				}
			},
		},
		{
			name: "foreign_call_ids_made_valid_and_unique",
			req: llm.Request{Tools: testTools, Messages: []llm.Message{
				userText("q"),
				assistant("openai", call("call_0", "list_dir", `{}`), call("functions.read_file:1", "read_file", `{"path":"a"}`)),
				tool(result("call_0", "list_dir", "a"), result("functions.read_file:1", "read_file", "A")),
				assistant("openai", call("call_0", "list_dir", `{"path":"memory"}`)),
				tool(result("call_0", "list_dir", "MEMORY.md")),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				wantRoles(t, got, "user", "assistant", "user", "assistant", "user")
				wantResults(t, got.Messages[2], "call_0", "functions_read_file_1")
				wantResults(t, got.Messages[4], "call_0_2")
			},
		},
		{
			name: "html_characters",
			req: llm.Request{System: "Answer in <answer> tags & be brief.", Tools: testTools, Messages: []llm.Message{
				userText("is 1 < 2 && 3 > 2?"),
				assistant("anthropic", call("toolu_a", "exec", `{"command": "test 1 -lt 2 && echo '<yes>'"}`)),
				tool(result("toolu_a", "exec", "<yes>")),
			}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.Messages[0].Text != "is 1 < 2 && 3 > 2?" || got.Messages[2].ToolResults[0].Content != "<yes>" {
					t.Errorf("text %q result %q", got.Messages[0].Text, got.Messages[2].ToolResults[0].Content)
				}
			},
		},
		{
			name: "forced_tool_and_options",
			req: llm.Request{System: "s", Tools: testTools, ForceTool: "list_dir", MaxTokens: 1000, Temperature: ptr(0.3),
				Messages: []llm.Message{userText("list")}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.ToolChoice != "list_dir" || got.MaxTokens != 1000 {
					t.Errorf("tool choice %q max tokens %d", got.ToolChoice, got.MaxTokens)
				}
			},
		},
		{
			name: "defaults",
			req:  llm.Request{Messages: []llm.Message{userText("hi")}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.MaxTokens != defaultMaxTokens || got.ThinkingBudget != 0 {
					t.Errorf("max tokens %d thinking %d", got.MaxTokens, got.ThinkingBudget)
				}
			},
		},
		{
			name: "thinking_budget",
			req:  llm.Request{ThinkingBudget: 2000, MaxTokens: 1000, Temperature: ptr(0.3), Messages: []llm.Message{userText("think")}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.ThinkingBudget != 2000 || got.MaxTokens != 2000+defaultMaxTokens {
					t.Errorf("thinking %d max tokens %d", got.ThinkingBudget, got.MaxTokens)
				}
			},
		},
		{
			name: "thinking_budget_raised_to_minimum",
			req:  llm.Request{ThinkingBudget: 100, Messages: []llm.Message{userText("think")}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.ThinkingBudget != minThinkingBudget || got.MaxTokens != defaultMaxTokens {
					t.Errorf("thinking %d max tokens %d", got.ThinkingBudget, got.MaxTokens)
				}
			},
		},
		{
			name: "thinking_off_for_forced_tool",
			req:  llm.Request{ThinkingBudget: 4000, Tools: testTools, ForceTool: "exec", Messages: []llm.Message{userText("run")}},
			check: func(t *testing.T, got fakellm.Request) {
				if got.ThinkingBudget != 0 || got.ToolChoice != "exec" {
					t.Errorf("thinking %d tool choice %q", got.ThinkingBudget, got.ToolChoice)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, raw := send(t, tt.req)
			tt.check(t, got)
			goldenPayload(t, tt.name, raw)
		})
	}
}

// TestRenderSameBodyForEquivalentHistories: the results of one turn may be
// stored as one tool message (docs/history.md#projection) or, in older
// sessions, one per result and in completion order; Anthropic gets the same
// single user message.
func TestRenderSameBodyForEquivalentHistories(t *testing.T) {
	base := []llm.Message{userText("what is in my notes?"), threeCalls}
	one := append(append([]llm.Message{}, base...), tool(resultA, resultB, resultC))
	split := append(append([]llm.Message{}, base...), tool(resultC), tool(resultA), tool(resultB))
	_, a := send(t, llm.Request{Tools: testTools, Messages: one})
	_, b := send(t, llm.Request{Tools: testTools, Messages: split})
	if !bytes.Equal(a, b) {
		t.Fatalf("payloads differ:\n%s\n%s", a, b)
	}
}

func TestRenderRefusesEmptyRequests(t *testing.T) {
	tests := []struct {
		name string
		req  llm.Request
	}{
		{"no model", llm.Request{Messages: []llm.Message{userText("hi")}}},
		{"no messages", llm.Request{Model: testModel}},
		{"only blank text", llm.Request{Model: testModel, Messages: []llm.Message{userText("  ")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res := run(t, f.p, context.Background(), tt.req)
			if res.err == nil {
				t.Fatal("want an error terminal")
			}
			if n := len(f.script.Requests()); n != 0 {
				t.Errorf("%d requests reached the server", n)
			}
		})
	}
}

// send streams req to a fresh strict fake and returns what it received.
func send(t *testing.T, req llm.Request) (fakellm.Request, []byte) {
	t.Helper()
	f := newFixture(t)
	if req.Model == "" {
		req.Model = testModel
	}
	res := run(t, f.p, context.Background(), req)
	noRejections(t, f.srv)
	if res.err != nil {
		t.Fatalf("stream failed: %v", res.err)
	}
	reqs := f.script.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake got %d requests, want 1", len(reqs))
	}
	return reqs[0], reqs[0].Raw
}

func goldenPayload(t *testing.T, name string, raw []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatalf("payload is not JSON: %v", err)
	}
	buf.WriteByte('\n')
	golden.Check(t, filepath.Join("testdata", name+".json"), buf.Bytes())
}

func wantRoles(t *testing.T, got fakellm.Request, roles ...string) {
	t.Helper()
	var have []string
	for _, m := range got.Messages {
		have = append(have, m.Role)
	}
	if !reflect.DeepEqual(have, roles) {
		t.Fatalf("roles = %v, want %v", have, roles)
	}
}

func wantResults(t *testing.T, m fakellm.Message, ids ...string) {
	t.Helper()
	var have []string
	for _, r := range m.ToolResults {
		have = append(have, r.CallID)
	}
	if !reflect.DeepEqual(have, ids) {
		t.Errorf("tool results = %v, want %v in one message", have, ids)
	}
}

func ptr[T any](v T) *T { return &v }
