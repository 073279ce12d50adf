package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// A channel's state files (Telegram's update journal, Discord's cursors,
// the pairing store) are small JSON documents rewritten whole
// (atomicfile.Write).

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
