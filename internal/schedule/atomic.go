package schedule

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
)

// writeFileAtomic replaces path with data (atomicfile.Write), creating its
// directory. Files are 0600 and directories 0700: jobs hold what users
// asked for.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600)
}
