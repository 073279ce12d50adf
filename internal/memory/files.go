package memory

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nanobot-go/nanobot/internal/filelock"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// The memory files, relative to the workspace (docs/memory.md).
const (
	MemoryFile  = workspace.MemoryFile
	HistoryFile = workspace.HistoryFile
)

// ErrConflict means MEMORY.md changed after it was read for a consolidation
// (another session's consolidation, or the model's edit_file). Nothing was
// written; read it again and redo the update so the change is merged, not
// overwritten.
var ErrConflict = errors.New("MEMORY.md changed while the update was prepared")

// Files reads and updates MEMORY.md and HISTORY.md. Every update holds a
// mutex and then the memory files' lock (workspace.MemoryLock, a flock), so
// concurrent consolidations of different sessions — in this process or in
// another one sharing the workspace — write one at a time, and Commit's
// compare-and-replace of MEMORY.md is atomic with respect to them and to the
// web panel's edits. The mutex keeps the goroutines of one process from
// queueing on the kernel lock; the flock is what other processes see. Reads
// take neither: MEMORY.md is replaced by rename, so it reads whole. Every
// path is reached through the daemon's workspace access (workspace.Files):
// a link planted in memory/ is never followed, a FIFO never waited on, and
// MEMORY.md is read only under workspace.MaxPromptFileBytes.
type Files struct {
	root *workspace.Files
	mu   sync.Mutex
}

// NewFiles returns the memory files of the workspace opened as root.
func NewFiles(root *workspace.Files) *Files { return &Files{root: root} }

// Memory returns MEMORY.md's content; a missing file reads as "". A file
// the daemon refuses (a link out, a FIFO, too large, not UTF-8) is an
// error: no consolidation merges into what the prompt leaves out.
func (f *Files) Memory() (string, error) {
	text, _, err := f.root.ReadText(MemoryFile, workspace.MaxPromptFileBytes)
	if err != nil {
		return "", fmt.Errorf("memory: read %s: %w", MemoryFile, err)
	}
	return text, nil
}

// Commit applies one consolidation. If MEMORY.md still reads base, it is
// replaced atomically by memory (only when that differs), then entry is
// appended to HISTORY.md. If MEMORY.md changed since base was read, nothing
// is written and the error wraps ErrConflict.
//
// MEMORY.md is written first on purpose: if the history append then fails,
// the retry merges into a memory that already holds the facts (harmless),
// whereas the other order would leave a history entry that the retry writes
// a second time.
func (f *Files) Commit(base, memory, entry string) error {
	release, err := f.lock()
	if err != nil {
		return fmt.Errorf("memory: commit: %w", err)
	}
	defer release()
	current, err := f.Memory()
	if err != nil {
		return err
	}
	if current != base {
		return fmt.Errorf("memory: commit: %w", ErrConflict)
	}
	if memory != current {
		if err := f.root.WriteFileAtomic(MemoryFile, []byte(memory), 0o600); err != nil {
			return fmt.Errorf("memory: write %s: %w", MemoryFile, err)
		}
	}
	return f.appendHistory(entry)
}

// AppendHistory appends entry to HISTORY.md as a paragraph of its own.
func (f *Files) AppendHistory(entry string) error {
	if strings.TrimSpace(entry) == "" {
		return nil
	}
	release, err := f.lock()
	if err != nil {
		return fmt.Errorf("memory: append %s: %w", HistoryFile, err)
	}
	defer release()
	return f.appendHistory(entry)
}

// lock takes the mutex and the memory files' flock, for one check and write;
// release gives up both. Taking the flock creates memory/ (the lock file lives
// there), which the writes need.
func (f *Files) lock() (release func(), err error) {
	return filelock.WithMutex(&f.mu, func() (func(), error) { return f.root.Guard(MemoryFile) })
}

// appendHistory writes entry with one write and an fsync, after a blank line
// separating it from what is there. The file is opened with O_APPEND so that
// even a writer that does not take the lock (an editor on the host) cannot be
// overwritten; the lock makes the separator check and the write one step. A
// failed write is cut off again so a retry does not leave half an entry
// behind. Called with the lock held.
func (f *Files) appendHistory(entry string) error {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return nil
	}
	file, err := f.root.OpenAppend(HistoryFile, 0o600)
	if err != nil {
		return fmt.Errorf("memory: append %s: %w", HistoryFile, err)
	}
	// The write is checked at Sync: after it Close has nothing left to lose.
	defer func() { _ = file.Close() }()
	size, err := file.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("memory: append %s: %w", HistoryFile, err)
	}
	sep, err := separator(file, size)
	if err != nil {
		return fmt.Errorf("memory: append %s: %w", HistoryFile, err)
	}
	_, err = file.Write([]byte(sep + entry + "\n"))
	if err == nil {
		err = file.Sync()
	}
	if err != nil {
		if terr := file.Truncate(size); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut off the partial entry: %w", terr))
		}
		return fmt.Errorf("memory: append %s: %w", HistoryFile, err)
	}
	return nil
}

// separator is what must precede a new paragraph in a file of size bytes so
// that exactly one blank line separates it from the previous text.
func separator(r io.ReaderAt, size int64) (string, error) {
	if size == 0 {
		return "", nil
	}
	tail := make([]byte, min(size, 2))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return "", err
	}
	switch {
	case len(tail) == 2 && tail[0] == '\n' && tail[1] == '\n':
		return "", nil
	case tail[len(tail)-1] == '\n':
		return "\n", nil
	}
	return "\n\n", nil
}
