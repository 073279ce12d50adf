// Package golden compares what a test produced with a file kept in the
// repository, and rewrites the file instead when the test runs with
// -update (go test ./internal/... -run Golden -update), so an intended
// change shows up as a diff to review. Test code only.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files the tests compare with")

// Updating reports whether the test run rewrites golden files.
func Updating() bool { return *update }

// Check compares got with the file at path. With -update it writes got
// there first (creating the directory). A mismatch names the first line
// that differs and shows all of got.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	line, g, w := firstDiff(got, want)
	t.Errorf("%s differs at line %d (run go test -update and review the diff if the change is intended)\n got: %s\nwant: %s\n--- all of got:\n%s",
		path, line, g, w, got)
}

// firstDiff returns the first line (1-based) where a and b differ, and that
// line of each.
func firstDiff(a, b []byte) (int, []byte, []byte) {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range max(len(al), len(bl)) {
		var x, y []byte
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if !bytes.Equal(x, y) || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
	return 0, nil, nil
}
