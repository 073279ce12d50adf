package openai

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestIsReasoningModel(t *testing.T) {
	cases := map[string]bool{
		"o1": true, "o1-mini": true, "o3-mini-2025-01-31": true, "o4-mini": true,
		"gpt-5": true, "gpt-5-mini": true, "gpt-5.1": true, "openai/o3": true, "GPT-5-nano": true,
		"gpt-4o": false, "gpt-4o-mini": false, "gpt-4.1": false, "deepseek-reasoner": false,
		"llama3.1:8b": false, "o1x": false, "gpt-50": false, "qwen/qwq-32b": false, "": false,
	}
	for model, want := range cases {
		if got := isReasoningModel(model); got != want {
			t.Errorf("isReasoningModel(%q) = %v, want %v", model, got, want)
		}
	}
}

func TestFileNote(t *testing.T) {
	cases := []struct {
		f    llm.FileRef
		want string
	}{
		{llm.FileRef{Path: "media/report.pdf", MIME: "application/pdf", Size: 2 << 20, Name: "Q3 report.pdf"}, "[file: Q3 report.pdf (application/pdf, 2.0 MiB) at media/report.pdf]"},
		{llm.FileRef{Path: "media/a.txt", Size: 1536}, "[file: a.txt (1.5 KiB) at media/a.txt]"},
		{llm.FileRef{Path: "media/b.bin", MIME: "application/octet-stream", Size: 12}, "[file: b.bin (application/octet-stream, 12 B) at media/b.bin]"},
		{llm.FileRef{Path: "media/c"}, "[file: c at media/c]"},
	}
	for _, tc := range cases {
		if got := fileNote(tc.f); got != tc.want {
			t.Errorf("fileNote(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestScrub(t *testing.T) {
	p := New("x", config.ProviderConfig{APIKey: "sk-secret-value-1234"}, nil, nil)
	if got := p.scrub("bad key sk-secret-value-1234 given"); got != "bad key [redacted] given" {
		t.Errorf("scrub = %q", got)
	}
}

// TestSteps: an assistant message comes with the tool messages right after
// it; any other message, a stray tool message included, comes alone.
func TestSteps(t *testing.T) {
	u, a, tl := llm.Message{Role: llm.RoleUser}, llm.Message{Role: llm.RoleAssistant}, llm.Message{Role: llm.RoleTool}
	tests := []struct {
		name string
		msgs []llm.Message
		want string // index:roles of each step
	}{
		{"empty", nil, ""},
		{"call and results", []llm.Message{u, a, tl, tl, u}, "0:user 1:assistant,tool,tool 4:user"},
		{"assistant without results", []llm.Message{a, a, u}, "0:assistant 1:assistant 2:user"},
		{"stray tool message", []llm.Message{tl, u, a, tl}, "0:tool 1:user 2:assistant,tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for i, step := range steps(tt.msgs) {
				var roles []string
				for _, m := range step {
					roles = append(roles, string(m.Role))
				}
				got = append(got, fmt.Sprintf("%d:%s", i, strings.Join(roles, ",")))
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("steps = %q, want %q", s, tt.want)
			}
		})
	}
}
