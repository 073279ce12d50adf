package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/filelock"
)

// Names MoveDir uses in the destination directory.
const (
	// moveLock is the lock file that keeps two processes starting at once
	// (the workers of a split gateway) from moving the same files.
	moveLock = ".move.lock"
	// moveTmp holds the copy of a file while it is copied across file
	// systems; whatever is in it is incomplete and is removed at the start.
	moveTmp = ".moving"
	// DuplicatesDir receives a moved file whose name is taken in the
	// destination by a file with other content: both are kept.
	DuplicatesDir = "workspace-duplicates"
)

// MoveResult says what MoveDir did.
type MoveResult struct {
	// Moved files now live in the destination (or in DuplicatesDir).
	Moved int
	// Duplicates were moved into DuplicatesDir because their name was taken
	// by a file with other content.
	Duplicates int
	// Left are entries MoveDir does not move (directories, symbolic links,
	// FIFOs, files with several hard links): the old directory stays while
	// they are there.
	Left []string
}

// MoveDir moves the files of the old sessions directory from (the
// workspace's sessions/, docs/sessions.md) into to, the sessions directory
// now, once at start, before any store opens either; it does nothing when from
// does not exist.
//
// Once means once ever, not once per start: when the move has run to its
// end (also when there was nothing to move, as on a fresh install), MoveDir
// writes the file done, which lies outside the workspace (the data dir),
// and while done exists it moves nothing, only logs that a sessions/ found
// in the workspace is not imported. New versions never write sessions
// there, so one found after the move was left by it or planted by a
// command, and a command's regular files must not become chats' logs. An
// empty done keeps the old behaviour (every start moves), for tests. It is safe against a crash at any point: each file is
// moved on its own by rename(2), or across file systems copied to a temporary
// file, fsync'd, renamed into place, and only then removed from from, so a
// file is always whole in one place or the other (or both, identical). A
// restart runs it again and it finishes: a file present in both with the
// same bytes is removed from from; one whose name is taken by other content
// is moved into to/DuplicatesDir, never over the other. The directory
// listing itself is the journal. Once from is empty it is removed.
//
// from lies in the workspace, where any command may write, so it is
// hostile (docs/tools.md#the-daemon-and-the-workspace): a link at from is
// never followed (left alone, with a warning), from is opened once without
// following a link and everything after works below that descriptor, so a
// link swapped in meanwhile leads nowhere; only regular files with one
// link are moved, never a link, a FIFO or a second name of a file kept
// elsewhere.
func MoveDir(from, to, done string, log *zap.Logger) (MoveResult, error) {
	m := mover{from: from, to: to, done: done, log: log, rename: renameNoReplace}
	return m.run()
}

// errCrashed is what a test's crash hook makes run return: it stops where it
// is, as a process killed there would.
var errCrashed = errors.New("crash injected")

// mover is one run of MoveDir. rename moves a file between the two
// directories without replacing an existing one (tests make it fail with
// EXDEV to take the copy path); crash, when set by a test, is asked at each
// step whether to stop there.
type mover struct {
	from, to string
	done     string // the marker that the move ran once; "" for none
	log      *zap.Logger
	rename   func(oldpath, newpath string) error
	crash    func(step, name string) bool
	res      MoveResult
}

func (m *mover) run() (MoveResult, error) {
	if m.ranBefore() {
		return m.res, nil
	}
	src, closeSrc, err := m.source()
	if err != nil {
		return m.res, err
	}
	if src == "" {
		return m.res, m.markDone()
	}
	defer closeSrc()
	if err := os.MkdirAll(m.to, 0o700); err != nil {
		return m.res, fmt.Errorf("move sessions: %w", err)
	}
	release, err := filelock.Acquire(filepath.Join(m.to, moveLock))
	if err != nil {
		return m.res, fmt.Errorf("move sessions: %w", err)
	}
	defer release()
	if m.ranBefore() { // another process finished it while this one waited
		return m.res, nil
	}
	if same, err := sameDir(src, m.to); err != nil || same {
		if same { // a bind mount of the sessions directory: nothing to move
			m.log.Warn("old sessions directory is the sessions directory itself; left alone", zap.String("dir", m.from))
			return m.res, m.markDone()
		}
		return m.res, wrap(err)
	}
	// A copy cut short by a crash: its source is still in from.
	if err := os.RemoveAll(filepath.Join(m.to, moveTmp)); err != nil {
		return m.res, fmt.Errorf("move sessions: clearing %s: %w", moveTmp, err)
	}
	des, err := os.ReadDir(src)
	if err != nil {
		return m.res, fmt.Errorf("move sessions: %w", err)
	}
	if len(des) > 0 {
		m.log.Info("moving sessions out of the workspace", zap.String("from", m.from), zap.String("to", m.to), zap.Int("entries", len(des)))
	}
	for _, de := range des {
		if !de.Type().IsRegular() || !singleLink(filepath.Join(src, de.Name())) {
			m.res.Left = append(m.res.Left, de.Name())
			continue
		}
		if err := m.moveFile(src, de.Name()); err != nil {
			return m.res, err
		}
	}
	if err := errors.Join(syncDir(m.to), syncDir(src)); err != nil {
		return m.res, fmt.Errorf("move sessions: %w", err)
	}
	_ = os.Remove(filepath.Join(m.to, moveTmp))
	if err := m.finish(); err != nil {
		return m.res, err
	}
	return m.res, m.markDone()
}

// doneRecord is what the marker file holds, for a person who looks: the
// daemon reads only whether it exists.
type doneRecord struct {
	MovedAt time.Time `json:"moved_at"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Files   int       `json:"files"`
	Left    []string  `json:"left,omitempty"`
}

// ranBefore reports whether the marker says the move ran to its end
// before; then a sessions/ in the workspace is logged, not imported.
func (m *mover) ranBefore() bool {
	if m.done == "" {
		return false
	}
	if _, err := os.Stat(m.done); err != nil {
		return false
	}
	if _, err := os.Lstat(m.from); err == nil {
		m.log.Warn("a sessions/ in the workspace after the one-time move of old sessions: not imported (the move left it, or a command planted it)",
			zap.String("dir", m.from), zap.String("moved_once", m.done),
			zap.String("fix", "move real session files into "+m.to+" by hand, then delete "+m.from))
	}
	return true
}

// markDone writes the marker that the move ran to its end.
func (m *mover) markDone() error {
	if m.done == "" {
		return nil
	}
	data, err := json.Marshal(doneRecord{MovedAt: time.Now().UTC(), From: m.from, To: m.to, Files: m.res.Moved, Left: m.res.Left})
	if err != nil {
		return fmt.Errorf("move sessions: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(m.done), 0o700); err != nil {
		return fmt.Errorf("move sessions: marking it done: %w", err)
	}
	if err := atomicfile.Write(m.done, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("move sessions: marking it done: %w", err)
	}
	return nil
}

// source opens the directory to move files from: from itself, never
// through a link. src names the open directory (/proc/self/fd/N on Linux,
// so no later step looks from up again); it is "" when there is nothing to
// move. closeSrc releases it.
func (m *mover) source() (src string, closeSrc func(), err error) {
	fi, err := os.Lstat(m.from)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("move sessions: %w", err)
	case fi.Mode()&os.ModeSymlink != 0:
		m.log.Warn("old sessions path is a link; it is not followed (a command in the workspace may have planted it) and is left alone",
			zap.String("link", m.from), zap.String("fix", "remove the link; move real session files into "+m.to+" by hand"))
		return "", nil, nil
	case !fi.IsDir():
		m.log.Warn("old sessions path is not a directory; left alone", zap.String("path", m.from))
		return "", nil, nil
	}
	d, err := os.OpenFile(m.from, os.O_RDONLY|oDirectory|oNoFollow, 0)
	if err != nil {
		return "", nil, fmt.Errorf("move sessions: %w", err)
	}
	if opened, err := d.Stat(); err != nil || !os.SameFile(fi, opened) {
		_ = d.Close()
		return "", nil, fmt.Errorf("move sessions: %s changed while it was opened", m.from)
	}
	return dirPath(d, m.from), func() { _ = d.Close() }, nil
}

// singleLink reports whether the file p is not also known by another name:
// moving a second name of a file kept elsewhere would make the daemon
// append to that file.
func singleLink(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	n, ok := linkCount(fi)
	return !ok || n == 1
}

// finish removes the emptied old directory, or says what keeps it.
func (m *mover) finish() error {
	if len(m.res.Left) > 0 {
		m.log.Warn("old sessions directory kept: it holds entries that are not session files; move or delete them",
			zap.String("dir", m.from), zap.Strings("entries", m.res.Left))
	} else {
		// Remove never follows a link: if one was swapped in for the
		// emptied directory, it is the link that goes.
		if err := os.Remove(m.from); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("move sessions: removing the emptied %s: %w", m.from, err)
		}
		_ = syncDir(filepath.Dir(m.from))
	}
	if m.res.Moved > 0 {
		m.log.Info("moved sessions out of the workspace", zap.String("from", m.from), zap.String("to", m.to),
			zap.Int("files", m.res.Moved), zap.Int("duplicates", m.res.Duplicates))
	}
	return nil
}

// moveFile moves src/name into the destination, or removes it when the
// destination already holds the same bytes (a restart after a crash between
// placing the copy and removing the original).
func (m *mover) moveFile(src, name string) error {
	if m.crash != nil && m.crash("start", name) {
		return errCrashed
	}
	old := filepath.Join(src, name)
	dir := m.to
	for i := 1; ; i++ {
		dst := filepath.Join(dir, name)
		same, err := sameContent(old, dst)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := m.place(old, dst); err != nil {
				return fmt.Errorf("move sessions: %s: %w", name, err)
			}
			m.res.Moved++
			if dir != m.to {
				m.res.Duplicates++
				m.log.Warn("a moved session file's name was taken by another file; both kept",
					zap.String("kept", filepath.Join(m.to, name)), zap.String("moved_to", dst))
			}
			return nil
		case err != nil:
			return fmt.Errorf("move sessions: %s: %w", name, err)
		case same:
			if err := os.Remove(old); err != nil {
				return fmt.Errorf("move sessions: %s: %w", name, err)
			}
			m.res.Moved++
			return nil
		}
		// Taken by other bytes: try the next duplicates directory.
		dir = filepath.Join(m.to, DuplicatesDir)
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", dir, i)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("move sessions: %w", err)
		}
	}
}

// place puts old at dst, which does not exist: by rename on one file
// system, by copy, fsync, rename and then removal across file systems.
func (m *mover) place(old, dst string) error {
	err := m.rename(old, dst)
	if !errors.Is(err, syscall.EXDEV) {
		if err == nil && m.crash != nil && m.crash("renamed", filepath.Base(old)) {
			return errCrashed
		}
		return err
	}
	tmp := filepath.Join(m.to, moveTmp, filepath.Base(old))
	if err := copyFile(old, tmp); err != nil {
		return err
	}
	if m.crash != nil && m.crash("copied", filepath.Base(old)) {
		return errCrashed
	}
	if err := renameNoReplace(tmp, dst); err != nil {
		return err
	}
	// The copy must be durably in place before the original goes.
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	if m.crash != nil && m.crash("renamed", filepath.Base(old)) {
		return errCrashed
	}
	return os.Remove(old)
}

// copyFile copies old to the new file tmp (0600, its directory created) and
// fsyncs it.
func copyFile(old, tmp string) error {
	in, err := os.OpenFile(old, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

// sameContent reports whether the files a and b hold the same bytes; the
// error is os.ErrNotExist's when b does not exist.
func sameContent(a, b string) (bool, error) {
	fb, err := os.OpenFile(b, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return false, err
	}
	defer func() { _ = fb.Close() }()
	fa, err := os.OpenFile(a, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return false, err
	}
	defer func() { _ = fa.Close() }()
	ia, err := fa.Stat()
	if err != nil {
		return false, err
	}
	ib, err := fb.Stat()
	if err != nil {
		return false, err
	}
	if !ib.Mode().IsRegular() {
		return false, nil
	}
	if os.SameFile(ia, ib) {
		return true, nil
	}
	if ia.Size() != ib.Size() {
		return false, nil
	}
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		switch {
		case endA && endB:
			return true, nil
		case endA != endB:
			return false, nil
		case errA != nil:
			return false, errA
		case errB != nil:
			return false, errB
		}
	}
}

// sameDir reports whether a and b are the same directory.
func sameDir(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

// syncDir makes renames and creations in dir durable; file systems that
// cannot sync a directory are let be.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
		err = nil
	}
	return errors.Join(err, d.Close())
}

// renameNoReplace renames oldpath to newpath unless newpath exists
// (os.ErrExist then); see renameNoReplaceOS. Link and remove is the fallback
// where the file system has no such rename: a crash between the two leaves
// one file under both names, which the next run recognises as the same.
func renameNoReplace(oldpath, newpath string) error {
	err := renameNoReplaceOS(oldpath, newpath)
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	if err := os.Link(oldpath, newpath); err != nil {
		if errors.Is(err, syscall.EXDEV) || errors.Is(err, os.ErrExist) || errors.Is(err, os.ErrNotExist) {
			return err
		}
		// No hard links either (FAT, some FUSE): the lock held and the
		// check before make a plain rename safe enough.
		if _, serr := os.Lstat(newpath); serr == nil {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: os.ErrExist}
		}
		return os.Rename(oldpath, newpath)
	}
	return os.Remove(oldpath)
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("move sessions: %w", err)
}
