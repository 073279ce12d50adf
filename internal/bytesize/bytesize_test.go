package bytesize

import "testing"

func TestFormat(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{48213, "47.1 KiB"},
		{20 << 20, "20.0 MiB"},
		{20<<20 + 400<<10, "20.4 MiB"},
		{3 << 29, "1.5 GiB"},
		{-5, "-5 B"},
	}
	for _, tc := range tests {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
