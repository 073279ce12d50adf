package workspace

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/nanobot-go/nanobot/internal/filelock"
)

// Lock files, next to the files they guard. Every read-check-write of a
// guarded file (a consolidation's compare-and-replace of MEMORY.md, an
// append to HISTORY.md, an edit in the web panel or by edit_file) holds the
// file's lock, so processes sharing the workspace on one volume never
// interleave them. Plain reads (the system prompt of every turn) take no
// lock: writes replace files by rename, so a reader sees the old or the new
// content whole.
const (
	// MemoryLock guards memory/MEMORY.md and memory/HISTORY.md.
	MemoryLock = "memory/.memory.lock"
	// BootstrapLock guards the bootstrap files in the workspace's top
	// directory (AGENTS.md, SOUL.md, USER.md, TOOLS.md, HEARTBEAT.md).
	BootstrapLock = ".bootstrap.lock"
)

// guarded maps each guarded file to its lock.
var guarded = map[string]string{
	"memory/MEMORY.md":  MemoryLock,
	"memory/HISTORY.md": MemoryLock,
	"AGENTS.md":         BootstrapLock,
	"SOUL.md":           BootstrapLock,
	"USER.md":           BootstrapLock,
	"TOOLS.md":          BootstrapLock,
	"HEARTBEAT.md":      BootstrapLock,
}

// LockOf returns the lock file guarding rel, a slash-separated path relative
// to the workspace, and whether it is guarded at all.
func LockOf(rel string) (string, bool) {
	lock, ok := guarded[path.Clean(rel)]
	return lock, ok
}

// Guard holds the lock of rel (see LockOf) in the workspace opened as root,
// creating the lock file and its directory as needed, until release is
// called. For a file without a lock it holds nothing. Hold it only for a
// check and a write, never across a model call: every process writing the
// file waits for it.
func Guard(root *os.Root, rel string) (release func(), err error) {
	lock, ok := LockOf(rel)
	if !ok {
		return func() {}, nil
	}
	if err := root.MkdirAll(path.Dir(lock), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock, err)
	}
	f, err := root.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock, err)
	}
	return filelock.Hold(f)
}

// Guard holds the lock of the file p leads to, if it is a guarded file of
// this workspace (see the package function Guard).
func (r *Root) Guard(p string) (release func(), err error) {
	where, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	if filepath.IsAbs(where) {
		return func() {}, nil
	}
	return Guard(r.root, filepath.ToSlash(where))
}
