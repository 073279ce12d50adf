package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A channel's state files (Telegram's update journal, Discord's cursors,
// the pairing store) are small JSON documents rewritten whole.

// ErrCorruptState is wrapped by ReadStateFile when a file does not parse.
var ErrCorruptState = errors.New("corrupt state file")

// ReadStateFile decodes the JSON file at path into v. A missing file is not
// an error: it reports found false and leaves v alone.
func ReadStateFile(path string, v any) (found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("%w %s: %w", ErrCorruptState, path, err)
	}
	return true, nil
}

// WriteFileAtomic writes data to path so that readers see either the old or
// the new content, never a torn file, even after a crash: it writes a temp
// file in the same directory, syncs it, renames it over path and syncs the
// directory.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after a successful rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: not every filesystem can sync a directory
		d.Close()
	}
	return nil
}
