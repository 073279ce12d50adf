package openai_test

import (
	"context"
	"iter"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestStopReasons: every way the fake ends an answer on the Chat
// Completions and Responses wires comes out as the normalised stop reason,
// with what was written before it (S-A5). Responses reports a cut or a
// filter with response.incomplete.
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
