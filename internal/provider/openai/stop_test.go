package openai_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// TestStopReasons: every way the fake ends an answer on the Chat
// Completions and Responses wires comes out as the normalised stop reason,
// with what was written before it
// (docs/reliability.md#every-turn-ends-with-something-to-read). Responses
// reports a cut or a filter with response.incomplete.
func TestStopReasons(t *testing.T) {
	call := []fakellm.Call{{ID: "call_1", Name: "f", Args: `{}`}}
	tests := []struct {
		name  string
		reply fakellm.Reply
		want  llm.StopReason
		text  string
	}{
		{"stop", fakellm.Reply{Text: "done"}, llm.StopEnd, "done"},
		{"tool calls", fakellm.Reply{ToolCalls: call}, llm.StopToolCalls, ""},
		{"length", fakellm.Reply{Text: "half an ans", Stop: llm.StopLength}, llm.StopLength, "half an ans"},
		{"length after thinking only", fakellm.Reply{Thinking: "long thought", Stop: llm.StopLength}, llm.StopLength, ""},
		{"refusal", fakellm.Reply{Text: "I can't help with that.", Stop: llm.StopRefusal}, llm.StopRefusal, "I can't help with that."},
		{"content filter", fakellm.Reply{Stop: llm.StopSafety}, llm.StopSafety, ""},
		{"unknown reason", fakellm.Reply{Stop: llm.StopOther}, llm.StopOther, ""},
	}
	apis := []struct {
		name   string
		stream func(*testing.T, *openaifake.Server) func(context.Context, llm.Request) iter.Seq[llm.Delta]
	}{
		{"chat", func(t *testing.T, f *openaifake.Server) func(context.Context, llm.Request) iter.Seq[llm.Delta] {
			return newProvider(t, f, nil).Stream
		}},
		{"responses", func(t *testing.T, f *openaifake.Server) func(context.Context, llm.Request) iter.Seq[llm.Delta] {
			return newResponses(t, f, func(*config.ProviderConfig) {}).Stream
		}},
	}
	for _, api := range apis {
		for _, tt := range tests {
			t.Run(api.name+"/"+tt.name, func(t *testing.T) {
				script := &fakellm.Script{}
				script.Push(tt.reply)
				fake := openaifake.New(t, script)
				r := collect(t, api.stream(t, fake)(context.Background(), userRequest("gpt-4o-mini", "hi")))
				mustOK(t, r)
				if rej := fake.Rejected(); len(rej) > 0 {
					t.Fatalf("fake rejected: %+v", rej)
				}
				if got := r.msg.Stop(); got != tt.want {
					t.Errorf("stop = %q, want %q", got, tt.want)
				}
				if got := r.msg.Text(); got != tt.text {
					t.Errorf("text = %q, want %q", got, tt.text)
				}
			})
		}
	}
}

// TestBrokenArgumentsReplayedAsEmptyObject: a call whose arguments did not
// parse goes back as {} on both APIs, so a server that parses arguments
// (the fake's strict mode, like vLLM) accepts the history; the error
// result still says what was wrong
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestBrokenArgumentsReplayedAsEmptyObject(t *testing.T) {
	broken := llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_1", Name: "read_file",
		RawArgs: `{"path": "notes`, ParseError: "arguments are not valid JSON: unexpected end of JSON input"}}
	result := llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_1", Name: "read_file", IsError: true,
		Content: llm.PlainContent("arguments are not valid JSON: unexpected end of JSON input")}}
	req := userRequest("gpt-4o-mini", "read my notes")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{broken}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{result}})
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(fakellm.Reply{Text: "Sorry."})
			fake := openaifake.New(t, script, openaifake.WithStrictArguments())
			stream := newProvider(t, fake, nil).Stream
			if api == "responses" {
				stream = newResponses(t, fake, nil).Stream
			}
			mustOK(t, collect(t, stream(context.Background(), req)))
			if rej := fake.Rejected(); len(rej) > 0 {
				t.Fatalf("strict server refused: %s", rej[0].Message)
			}
			got := script.Requests()[0]
			var args, content string
			for _, m := range got.Messages {
				for _, c := range m.ToolCalls {
					args = c.Args
				}
				for _, r := range m.ToolResults {
					content = r.Content
				}
			}
			if args != "{}" || !strings.Contains(content, "not valid JSON") {
				t.Errorf("call sent with arguments %q, result %q", args, content)
			}
		})
	}
}
