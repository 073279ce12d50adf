package workspace

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Open opens p for reading. See OpenFile.
func (r *Root) Open(p string) (*os.File, error) {
	return r.OpenFile(p, os.O_RDONLY, 0)
}

// OpenFile resolves p (see Resolve) and opens it with the flags of
// os.OpenFile. Inside the workspace the file is opened through os.Root, so a
// symlink changed after the check still cannot lead outside; the open file is
// then checked again (see the package comment).
func (r *Root) OpenFile(p string, flag int, perm fs.FileMode) (*os.File, error) {
	where, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	if r.afterResolve != nil {
		r.afterResolve()
	}
	// O_TRUNC would destroy the file before checkOpen can refuse it (a hard
	// link, or a path swapped into sessions/), so truncate only after.
	trunc := flag&os.O_TRUNC != 0
	flag &^= os.O_TRUNC
	// Non-blocking, so a FIFO planted where a file was cannot hang the
	// tool call in open(2); it is refused below.
	flag |= oNonblock
	var f *os.File
	if filepath.IsAbs(where) {
		f, err = os.OpenFile(where, flag, perm)
	} else {
		f, err = r.root.OpenFile(where, flag, perm)
	}
	if err != nil {
		return nil, r.fsError(p, err)
	}
	if err := r.checkOpen(p, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice) != 0 {
		_ = f.Close()
		return nil, &PathError{Path: p, Detail: kindOf(fi.Mode()), Err: ErrNotRegular}
	}
	if trunc {
		if err := f.Truncate(0); err != nil {
			_ = f.Close()
			return nil, r.fsError(p, err)
		}
	}
	return f, nil
}

// ReadFile reads the whole file p, refusing files larger than max bytes with
// an error wrapping ErrTooLarge.
func (r *Root) ReadFile(p string, max int64) ([]byte, error) {
	f, err := r.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, r.fsError(p, err)
	}
	if fi.IsDir() {
		return nil, &PathError{Path: p, Err: errors.New("is a directory")}
	}
	if fi.Size() > max {
		return nil, &PathError{Path: p, Detail: fmt.Sprintf("%d bytes, the limit is %d", fi.Size(), max), Err: ErrTooLarge}
	}
	// Read one byte past max: a file that grew since Stat is caught too.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, r.fsError(p, err)
	}
	if int64(len(data)) > max {
		return nil, &PathError{Path: p, Detail: fmt.Sprintf("more than %d bytes", max), Err: ErrTooLarge}
	}
	return data, nil
}

// WriteFileAtomic replaces p with data: it writes a temporary file in the same
// directory, syncs it and renames it over p, so readers see the old or the new
// content, never a mix. An existing file keeps its permission bits; a new one
// gets perm. The parent directory must exist (see MkdirAll).
//
// Renaming replaces the directory entry, so if p was a hard link to another
// file, that other file is left untouched and p becomes a file of its own.
func (r *Root) WriteFileAtomic(p string, data []byte, perm fs.FileMode) error {
	where, err := r.Resolve(p)
	if err != nil {
		return err
	}
	if r.afterResolve != nil {
		r.afterResolve()
	}
	return r.writeAtomicAt(p, where, data, perm)
}

// writeAtomicAt is WriteFileAtomic of p once resolved to where. Only the
// directory is looked up by path (through the root); the last component is
// replaced, whatever it is, never followed.
func (r *Root) writeAtomicAt(p, where string, data []byte, perm fs.FileMode) error {
	if where == "." {
		return &PathError{Path: p, Err: errors.New("is the workspace directory, not a file")}
	}
	dirPath, base := filepath.Split(where)
	dir, err := r.openDir(dirPath)
	if err != nil {
		return r.fsError(p, err)
	}
	defer dir.Close()
	// Everything below happens relative to this one open directory, checked
	// once, so no later path lookup can be redirected.
	d, err := dir.Open(".")
	if err != nil {
		return r.fsError(p, err)
	}
	defer func() { _ = d.Close() }()
	if err := r.checkOpen(p, d); err != nil {
		return err
	}
	if fi, err := dir.Lstat(base); err == nil {
		if fi.IsDir() {
			return &PathError{Path: p, Err: errors.New("is a directory")}
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
	}
	tmp := ".nanobot-tmp-" + rand.Text()
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return r.fsError(p, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = dir.Rename(tmp, base)
	}
	if werr != nil {
		_ = dir.Remove(tmp)
		return r.fsError(p, werr)
	}
	// Make the rename itself durable; a failure here does not undo the write.
	_ = d.Sync()
	return nil
}

// openDir opens the directory dirPath (workspace-relative, or absolute when
// outside an unrestricted workspace) as a root of its own.
func (r *Root) openDir(dirPath string) (*os.Root, error) {
	if filepath.IsAbs(dirPath) {
		return os.OpenRoot(dirPath)
	}
	if dirPath == "" {
		dirPath = "."
	}
	return r.root.OpenRoot(dirPath)
}

// Stat returns information about p, following symlinks.
func (r *Root) Stat(p string) (fs.FileInfo, error) {
	where, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	var fi fs.FileInfo
	if filepath.IsAbs(where) {
		fi, err = os.Stat(where)
	} else {
		fi, err = r.root.Stat(where)
	}
	if err != nil {
		return nil, r.fsError(p, err)
	}
	return fi, nil
}

// ReadDir lists the directory p sorted by name.
func (r *Root) ReadDir(p string) ([]fs.DirEntry, error) {
	f, err := r.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, r.fsError(p, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// MkdirAll creates the directory p and any missing parents with mode perm.
func (r *Root) MkdirAll(p string, perm fs.FileMode) error {
	where, err := r.Resolve(p)
	if err != nil {
		return err
	}
	if filepath.IsAbs(where) {
		err = os.MkdirAll(where, perm)
	} else {
		err = r.root.MkdirAll(where, perm)
	}
	if err != nil {
		return r.fsError(p, err)
	}
	// Check where the directory really is, in case a component was swapped
	// for a symlink while it was being created.
	d, err := r.Open(p)
	if err != nil {
		return err
	}
	return d.Close()
}

// checkOpen is the last layer of confinement: it checks the open file f
// itself, so it holds even if the path changed after Resolve.
func (r *Root) checkOpen(p string, f *os.File) error {
	if real, ok := openPath(f); ok {
		if r.inRealSessions(real) {
			return &PathError{Path: p, Err: ErrSessions}
		}
		if rel, inside := within(r.dir, real); inside && isSessions(rel) {
			return &PathError{Path: p, Err: ErrSessions}
		} else if !inside && r.restrict {
			return &PathError{Path: p, Detail: "it is opened at " + real, Err: ErrOutside}
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return r.fsError(p, err)
	}
	n, ok := linkCount(fi)
	if !ok || n <= 1 || !fi.Mode().IsRegular() {
		return nil
	}
	if r.restrict {
		return &PathError{Path: p, Detail: fmt.Sprintf("%d links", n), Err: ErrHardLink}
	}
	// Unrestricted: outside files are allowed anyway, so only a second name
	// for a session log matters.
	if r.isSessionFile(fi) {
		return &PathError{Path: p, Detail: "it is a hard link to a session log", Err: ErrSessions}
	}
	return nil
}

// isSessionFile reports whether fi is the same file as one directly in
// sessions/ or the sessions dir (where the session store keeps its logs).
func (r *Root) isSessionFile(fi fs.FileInfo) bool {
	for _, sess := range r.sessionDirs() {
		entries, err := os.ReadDir(sess)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if si, err := os.Stat(filepath.Join(sess, e.Name())); err == nil && os.SameFile(fi, si) {
				return true
			}
		}
	}
	return false
}

// fsError wraps a file system error with the caller's path, replacing the
// absolute or workspace-internal path in it so the model sees the path it
// used.
func (r *Root) fsError(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		// os.Root's refusal: a symlink changed between the check and the open.
		return &PathError{Path: p, Detail: "a symlink leads out of it", Err: ErrOutside}
	}
	return &PathError{Path: p, Err: err}
}
