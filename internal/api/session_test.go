package api

import (
	"strings"
	"testing"
)

func TestValidSessionID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"user@example.com+1._-", true},
		{"a b", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := validSessionID(tt.in); got != tt.want {
			t.Errorf("validSessionID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
