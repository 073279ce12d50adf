package api_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestFinishReasonSaysHowTheModelStopped: a cut answer ends with "length",
// a refused or filtered one with "content_filter", each with the note the
// user reads; an empty answer is never a silent 200
// (docs/reliability.md#every-turn-ends-with-something-to-read). Both modes.
func TestFinishReasonSaysHowTheModelStopped(t *testing.T) {
	tests := []struct {
		name    string
		reply   fakellm.Reply
		content string // a prefix
		finish  openai.FinishReason
		status  int // for an error answer
	}{
		{"cut", fakellm.Reply{Text: "The first half", Stop: llm.StopLength}, "The first half\n\n… (cut off", openai.FinishReasonLength, 0},
		{"cut after thinking only", fakellm.Reply{Thinking: "so long", Stop: llm.StopLength}, "⚠️ The model hit its output limit", openai.FinishReasonLength, 0},
		{"refused", fakellm.Reply{Text: "I can't help with that.", Stop: llm.StopRefusal}, "I can't help with that.\n\n… (the model declined", openai.FinishReasonContentFilter, 0},
		{"filtered", fakellm.Reply{Stop: llm.StopSafety}, "⚠️ The model provider's safety filter", openai.FinishReasonContentFilter, 0},
		{"empty", fakellm.Reply{}, "⚠️ The model sent an empty or broken answer", "", 500},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/whole", func(t *testing.T) {
			h := newHarness(t)
			h.script.Push(tt.reply)
			resp, err := h.client(webuiToken).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: "nanobot", Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
			if tt.status != 0 {
				var apiErr *openai.APIError
				if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.status || !strings.HasPrefix(apiErr.Message, tt.content) {
					t.Fatalf("err = %#v, want %d %q", err, tt.status, tt.content)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := resp.Choices[0]; !strings.HasPrefix(c.Message.Content, tt.content) || c.FinishReason != tt.finish {
				t.Errorf("answer %q, finish %q; want %q…, %q", c.Message.Content, c.FinishReason, tt.content, tt.finish)
			}
		})
		t.Run(tt.name+"/stream", func(t *testing.T) {
			h := newHarness(t)
			h.script.Push(tt.reply)
			stream, err := h.client(webuiToken).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
				Model: "nanobot", Stream: true, Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stream.Close() }()
			var content strings.Builder
			var finish openai.FinishReason
			for {
				chunk, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if tt.status == 0 || !strings.Contains(err.Error(), tt.content) {
						t.Fatalf("stream error %v", err)
					}
					return
				}
				for _, c := range chunk.Choices {
					content.WriteString(c.Delta.Content)
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			if tt.status != 0 {
				t.Fatalf("stream ended without an error; content %q", content.String())
			}
			if !strings.HasPrefix(content.String(), tt.content) || finish != tt.finish {
				t.Errorf("streamed %q, finish %q; want %q…, %q", content.String(), finish, tt.content, tt.finish)
			}
		})
	}
}
