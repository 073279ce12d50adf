package usage

import (
	"encoding/json"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestPriceTable(t *testing.T) {
	pt := NewPriceTable(map[string]Price{"openai/gpt-4o": {Input: 1, Output: 2}, "ollama/llama3": {}})
	tests := []struct {
		provider, model string
		tokens          llm.Usage
		want            string
	}{
		{"openai", "gpt-4o", llm.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, "$3"}, // the override
		{"openai", "gpt-4o-mini-2024-07-18", llm.Usage{InputTokens: 1_000_000}, "$0.15"},       // snapshot of a default
		{"anthropic", "claude-sonnet-4-5-20250929", llm.Usage{CacheReadTokens: 1_000_000, CacheWriteTokens: 1_000_000}, "$4.05"},
		{"gemini", "gemini-2.5-flash", llm.Usage{OutputTokens: 1000, ReasoningTokens: 800}, "$0.0025"}, // reasoning is inside output
		{"ollama", "llama3", llm.Usage{InputTokens: 5}, "$0"},                                          // priced at 0 by the user: $0
		{"vllm", "qwen", llm.Usage{InputTokens: 5}, "unpriced"},
	}
	for _, tt := range tests {
		got := pt.Price(Record{Provider: tt.provider, Model: tt.model, Tokens: tt.tokens})
		if got.String() != tt.want {
			t.Errorf("%s/%s: %s, want %s", tt.provider, tt.model, got, tt.want)
		}
	}
	if c := pt.Price(Record{Provider: "transcription", Model: "whisper-1", AudioSeconds: 90}); c.String() != "$0.0090" {
		t.Errorf("whisper 90s = %s", c)
	}
}

func TestCostJSON(t *testing.T) {
	for _, c := range []Cost{USD(1.5), Unpriced.Add(USD(2)), {}} {
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Cost
		if err := json.Unmarshal(raw, &back); err != nil || back != c {
			t.Errorf("%s → %s → %+v (%v)", c, raw, back, err)
		}
	}
	if Unpriced.JSONUSD() != nil {
		t.Error("unpriced must be null, never 0")
	}
	if v := USD(0.25).JSONUSD(); v == nil || *v != 0.25 {
		t.Errorf("JSONUSD = %v", v)
	}
}
