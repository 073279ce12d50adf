package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// onboard writes the web token (0600); `web token` prints it; --rotate
// replaces it.
func TestWebToken(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.home, ".nanobot", "web-token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("onboard wrote no web token: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("web token mode %v, want 0600", fi.Mode().Perm())
	}
	out, _, err := e.run("web", "token")
	if err != nil {
		t.Fatalf("web token: %v", err)
	}
	first := strings.TrimSpace(out)
	if len(first) < 32 || first != strings.TrimSpace(string(mustRead(t, path))) {
		t.Fatalf("web token printed %q, file holds %q", first, mustRead(t, path))
	}
	out, stderr, err := e.run("web", "token", "--rotate")
	if err != nil {
		t.Fatalf("web token --rotate: %v\n%s", err, stderr)
	}
	second := strings.TrimSpace(out)
	if second == first || second != strings.TrimSpace(string(mustRead(t, path))) {
		t.Fatalf("rotate printed %q; file holds %q; old %q", second, mustRead(t, path), first)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("after rotate mode %v", fi.Mode().Perm())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := e.run("web", "token"); err == nil || !strings.Contains(stderr, "--rotate") {
		t.Errorf("missing token: err %v, stderr %q; want a hint to --rotate", err, stderr)
	}
}
