package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
)

func TestInstall(t *testing.T) {
	tmpl := fstest.MapFS{
		"AGENTS.md":         {Data: []byte("agents")},
		"memory/MEMORY.md":  {Data: []byte("memory")},
		"memory/HISTORY.md": {Data: []byte("history")},
		"skills/README.md":  {Data: []byte("skills")},
	}
	dir := filepath.Join(t.TempDir(), "ws")

	created, err := Install(tmpl, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AGENTS.md", "memory/", "memory/HISTORY.md", "memory/MEMORY.md", "skills/", "skills/README.md"}
	if !slices.Equal(created, want) {
		t.Fatalf("created = %q, want %q", created, want)
	}
	for _, p := range []string{"memory", "skills"} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", p, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "AGENTS.md")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("AGENTS.md: %v %v, want 0600", fi.Mode(), err)
	}

	// A second install with a user-edited file and a deleted one: the edit
	// survives, the deleted file comes back, nothing else is reported.
	write(t, filepath.Join(dir, "AGENTS.md"), "my own rules")
	if err := os.Remove(filepath.Join(dir, "memory", "HISTORY.md")); err != nil {
		t.Fatal(err)
	}
	created, err = Install(tmpl, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(created, []string{"memory/HISTORY.md"}) {
		t.Fatalf("second install created %q, want only memory/HISTORY.md", created)
	}
	if got := read(t, filepath.Join(dir, "AGENTS.md")); got != "my own rules" {
		t.Fatalf("AGENTS.md overwritten: %q", got)
	}
}

func TestInstallNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	// A dangling symlink where a template file goes: O_EXCL refuses to create
	// through it, so nothing appears outside.
	symlink(t, outside, filepath.Join(dir, "AGENTS.md"))
	created, err := Install(fstest.MapFS{"AGENTS.md": {Data: []byte("x")}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 0 {
		t.Fatalf("created %q through a symlink", created)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("file created outside: %v", err)
	}
}

// TestInstallFileWhereDirExpected: whatever a command left where the
// template has a directory (a file, a FIFO, a link out of the workspace) is
// left alone with everything below it; it is doctor's finding, never a
// reason for the daemon not to start (it used to fail the install, and with
// it every start).
func TestInstallFileWhereDirExpected(t *testing.T) {
	outside := t.TempDir()
	for name, plant := range map[string]func(dir string){
		"file": func(dir string) { write(t, filepath.Join(dir, "memory"), "not a dir") },
		"link": func(dir string) { symlink(t, outside, filepath.Join(dir, "memory")) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			plant(dir)
			created, err := Install(fstest.MapFS{"memory/MEMORY.md": {Data: []byte("x")}, "AGENTS.md": {Data: []byte("y")}}, dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(created) != 1 || created[0] != "AGENTS.md" {
				t.Errorf("created %q, want only AGENTS.md", created)
			}
			if _, err := os.Stat(filepath.Join(outside, "MEMORY.md")); !os.IsNotExist(err) {
				t.Errorf("wrote through the link: %v", err)
			}
		})
	}
}
