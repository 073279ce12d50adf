package workspace

import "testing"

// BenchmarkResolve measures the path check of one file-tool call for a path
// two directories deep inside the workspace.
func BenchmarkResolve(b *testing.B) {
	f := newFixture(b)
	r, err := OpenRoot(f.ws, Options{Restrict: true, Home: f.home})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for b.Loop() {
		if _, err := r.Resolve("link_in/a.md"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFile measures a confined open, check and read of a small file.
func BenchmarkReadFile(b *testing.B) {
	f := newFixture(b)
	r, err := OpenRoot(f.ws, Options{Restrict: true, Home: f.home})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for b.Loop() {
		if _, err := r.ReadFile("notes/a.md", 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
