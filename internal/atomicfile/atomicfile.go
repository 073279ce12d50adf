// Package atomicfile replaces small files whole, so that a reader, or the
// next start after a crash, sees the old content or the new, never a mix.
// It serves the files nanobot keeps outside the workspace (a channel's
// state, the pairing store, the web conversations, cron jobs, the
// heartbeat's state); files inside the workspace are replaced through
// workspace.Root.WriteFileAtomic, which does the same confined to the
// workspace.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data: it writes a temporary file in the same
// directory with perm, syncs it, renames it over path and syncs the
// directory. The directory must exist. On error path is unchanged and no
// temporary file is left.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // a no-op after a successful rename
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable. Some filesystems cannot sync a
// directory; that is not worth failing the write for.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
