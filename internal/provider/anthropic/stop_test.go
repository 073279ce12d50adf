package anthropic

import (
	"context"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestStopReasons: every way the fake can end an answer on the wire comes
// out as the normalised stop reason, with what was written before it
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestStopReasons(t *testing.T) {
	tests := []struct {
		name  string
		reply fakellm.Reply
		want  llm.StopReason
		text  string
	}{
		{"end", fakellm.Reply{Text: "done"}, llm.StopEnd, "done"},
		{"tool use", fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "toolu_1", Name: "f", Args: `{}`}}}, llm.StopToolCalls, ""},
		{"max_tokens", fakellm.Reply{Text: "half an ans", Stop: llm.StopLength}, llm.StopLength, "half an ans"},
		{"max_tokens after thinking only", fakellm.Reply{Thinking: "long thought", Stop: llm.StopLength}, llm.StopLength, ""},
		{"refusal", fakellm.Reply{Stop: llm.StopRefusal}, llm.StopRefusal, ""},
		{"pause_turn", fakellm.Reply{Stop: llm.StopOther}, llm.StopOther, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.script.Push(tt.reply)
			res := run(t, f.p, context.Background(), ask("hi"))
			if res.err != nil {
				t.Fatal(res.err)
			}
			noRejections(t, f.srv)
			if got := res.msg.Stop(); got != tt.want {
				t.Errorf("stop = %q, want %q", got, tt.want)
			}
			if got := res.msg.Text(); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
		})
	}
}
