package telegram

import (
	"strings"
	"testing"
)

// TestWebhookSecretLength: the length is checked apart from the pattern
// (moved here with the section from internal/config).
func TestWebhookSecretLength(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want bool
	}{
		{"secret of 256", strings.Repeat("a", 256), true},
		{"secret of 257", strings.Repeat("a", 257), false},
		{"empty secret", "", false},
		{"secret with a dot", "a.b", false},
	} {
		if got := validSecret(tt.in); got != tt.want {
			t.Errorf("%s: validSecret(%q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}
