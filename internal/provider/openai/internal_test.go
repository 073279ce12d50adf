package openai

import (
	"net/http"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"milliseconds win", map[string]string{"Retry-After": "7", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After": "3", "Retry-After-Ms": "soon"}, 3 * time.Second},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"garbage", map[string]string{"Retry-After": "later please"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tc.want {
				t.Errorf("retryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

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
