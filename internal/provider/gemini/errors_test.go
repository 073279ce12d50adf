package gemini

import (
	"testing"
	"time"
)

// TestParseDuration: RetryInfo's retryDelay is a protobuf Duration in JSON,
// seconds with an "s"; anything else is no usable wait.
func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"34s", 34 * time.Second},
		{"0.5s", 500 * time.Millisecond},
		{"1.500s", 1500 * time.Millisecond},
		{" 2s ", 2 * time.Second},
		{"0s", 0},
		{"-3s", 0},
		{"34", 0},
		{"", 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := parseDuration(tt.in); got != tt.want {
			t.Errorf("parseDuration(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
