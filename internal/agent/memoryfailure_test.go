package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/memory"
)

// /status says why consolidation failed: memory's own reasons, and a model
// call's in the words of llm's table.
func TestMemoryFailure(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "unknown reason"},
		{fmt.Errorf("consolidate: %w", memory.ErrNoCall), "the model did not answer in the form memory needs"},
		{memory.ErrConflict, "memory kept changing while it was being updated"},
		{fmt.Errorf("consolidate: %w", &llm.APIError{Provider: "openai", Status: 401}),
			"the model provider refused the API key — openai answered HTTP 401"},
		{&llm.APIError{Provider: "openai", Status: 429}, "the model provider is rate-limiting — openai answered HTTP 429"},
		{fmt.Errorf("consolidate: %w", context.DeadlineExceeded), "time ran out before the model answered"},
		{context.Canceled, "cancelled"},
		{llm.ErrTruncated, "the model's answer was cut off"},
	}
	for _, tt := range tests {
		if got := memoryFailure(tt.err); got != tt.want {
			t.Errorf("memoryFailure(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
