package workspace

import (
	"path/filepath"
	"testing"
)

// FuzzResolve checks Resolve's promise for any input: it never panics, and a
// path it accepts, followed through every symlink, stays out of sessions/ and
// (when restricted) inside the workspace. The fixture has symlinks leading in,
// out and into sessions/ for the fuzzer to combine.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	for _, seed := range []string{
		"notes/a.md", "../x", "/etc/passwd", "~", "~/x", "~/.nanobot/workspace/sessions/s.jsonl",
		"link_out", "link_sess/s.jsonl", "SeSsIoNs", "a\x00b", "link_up/../x", "loop1/x",
		"link_in/../sessions", "./link_sess_dotdot/", fx.ws + "/sessions", fx.out + "/to_sess/s.jsonl",
	} {
		f.Add(seed)
	}
	roots := map[bool]*Root{}
	for _, restrict := range []bool{true, false} {
		r, err := OpenRoot(fx.ws, Options{Restrict: restrict, Home: fx.home})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { r.Close() })
		roots[restrict] = r
	}
	sessions := filepath.Join(fx.ws, SessionsDir)
	f.Fuzz(func(t *testing.T, p string) {
		for restrict, r := range roots {
			got, err := r.Resolve(p)
			if err != nil {
				continue
			}
			abs := got
			if !filepath.IsAbs(got) {
				if got != "." && !filepath.IsLocal(got) {
					t.Fatalf("Resolve(%q) = %q: relative but not local", p, got)
				}
				if isSessions(got) {
					t.Fatalf("Resolve(%q) = %q: in sessions/", p, got)
				}
				abs = filepath.Join(fx.ws, got)
			} else if restrict {
				t.Fatalf("restricted Resolve(%q) = %q: outside the workspace", p, got)
			}
			real, err := evalSymlinks(abs)
			if err != nil {
				t.Fatalf("Resolve(%q) = %q, which does not resolve: %v", p, got, err)
			}
			if _, in := within(sessions, real); in {
				t.Fatalf("Resolve(%q) = %q, which leads into sessions/ (%s)", p, got, real)
			}
			if _, in := within(fx.ws, real); restrict && !in {
				t.Fatalf("restricted Resolve(%q) = %q, which leads outside (%s)", p, got, real)
			}
		}
	})
}
