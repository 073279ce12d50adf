package gobuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuildMatchesTheTestBinary builds a small program and checks, from the
// build settings go version -m reads back, that it was built with the
// race detector exactly when this test binary was.
func TestBuildMatchesTheTestBinary(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module probe\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	if err := Build(dir, bin, "."); err != nil {
		t.Fatal(err)
	}
	self, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	built := string(out)
	want := setting(self, "-race") == "true"
	if got := strings.Contains(built, "build\t-race=true"); got != want {
		t.Errorf("built with race = %v, the test binary with race = %v:\n%s", got, want, built)
	}
	if want != raceEnabled {
		t.Errorf("raceEnabled = %v, the test binary's build info says %v", raceEnabled, want)
	}
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
