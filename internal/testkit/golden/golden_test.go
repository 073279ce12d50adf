package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the failure instead of failing.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Errorf(format string, args ...any) { r.msg = format }
func (r *recorder) Helper()                           {}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.golden")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		got      string
		wantFail bool
	}{
		{"same", "one\ntwo\nthree\n", false},
		{"a line changed", "one\n2\nthree\n", true},
		{"a line missing", "one\ntwo\n", true},
		{"a line added", "one\ntwo\nthree\nfour\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			Check(r, path, []byte(tt.got))
			if failed := r.msg != ""; failed != tt.wantFail {
				t.Errorf("failed = %v (%s), want %v", failed, r.msg, tt.wantFail)
			}
			if tt.wantFail && !strings.Contains(r.msg, "differs at line") {
				t.Errorf("message %q does not say where", r.msg)
			}
		})
	}
}

func TestFirstDiff(t *testing.T) {
	tests := []struct {
		a, b     string
		wantLine int
	}{
		{"x\ny", "x\nz", 2},
		{"x", "x\ny", 2},
		{"a", "b", 1},
		{"same\n", "same\n", 0},
	}
	for _, tt := range tests {
		if line, _, _ := firstDiff([]byte(tt.a), []byte(tt.b)); line != tt.wantLine {
			t.Errorf("firstDiff(%q, %q) = line %d, want %d", tt.a, tt.b, line, tt.wantLine)
		}
	}
}
