package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		before  *string // the file's content before; nil: none
		perm    os.FileMode
		missing bool // the directory does not exist
		wantErr bool
	}{
		{name: "new file", perm: 0o600},
		{name: "replaces a file", before: ptr("old content, longer than the new"), perm: 0o600},
		{name: "takes perm", before: ptr("x"), perm: 0o640},
		{name: "no directory", perm: 0o600, missing: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.missing {
				dir = filepath.Join(dir, "gone")
			}
			path := filepath.Join(dir, "state.json")
			if tt.before != nil {
				if err := os.WriteFile(path, []byte(*tt.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := Write(path, []byte(`{"next":3}`), tt.perm)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Write: %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != `{"next":3}` {
				t.Fatalf("content %q, %v", got, err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != tt.perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode().Perm(), err, tt.perm)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// A failed write leaves what stood at the path as it was and no temporary
// file: here a directory stands where the file should go, so the rename
// fails after the temporary file was written and synced.
func TestWriteFailureKeepsWhatWasThere(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "sub")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(target, "keep")
	if err := os.WriteFile(keep, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("new"), 0o600); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if got, err := os.ReadFile(keep); err != nil || string(got) != "old" {
		t.Errorf("the directory's file = %q, %v", got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".sub.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func ptr(s string) *string { return &s }
