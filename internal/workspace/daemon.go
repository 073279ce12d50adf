package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/filelock"
)

// More sentinel errors of Files, wrapped in a *PathError like the others.
var (
	// ErrNotRegular: the path is a FIFO, a socket, a device or a directory
	// where the daemon expects a regular file. Replace it with a file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotText: a file that goes into a prompt holds bytes that are not
	// UTF-8 text (or a NUL byte). Save it as UTF-8.
	ErrNotText = errors.New("not UTF-8 text")
)

// Files is the daemon's own access to the workspace: the prompt's files,
// memory, skills, HEARTBEAT.md, the inbox, files sent to chats, the panel's
// edits, locks. Every path is relative to the workspace (slash-separated)
// and reached through an os.Root, so no link leads out of it, whatever
// tools.restrict_to_workspace says; sessions/ is refused. A file is opened
// with O_NONBLOCK (a FIFO cannot hang the open) and then checked by fstat:
// only a regular file with one link is read or written. Every read states a
// cap. Files is safe for concurrent use.
type Files struct {
	root *Root
	log  *zap.Logger

	mu     sync.Mutex
	warned map[string]warning // by path: the last problem logged
}

// warning is a problem logged for a path, so that the same one is not
// logged again on every turn.
type warning struct {
	text string
	at   time.Time
}

// rewarn is how long an unchanged problem of a file stays quiet in the log.
const rewarn = time.Hour

// OpenFiles opens the workspace directory dir, which must exist, for the
// daemon's own access. log receives one line per skipped file (Skip); nil
// logs nothing.
func OpenFiles(dir string, log *zap.Logger) (*Files, error) {
	root, err := OpenRoot(dir, Options{Restrict: true})
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Files{root: root, log: log, warned: map[string]warning{}}, nil
}

// Close releases the workspace directory.
func (f *Files) Close() error { return f.root.Close() }

// Dir is the workspace's absolute path with symlinks resolved.
func (f *Files) Dir() string { return f.root.Dir() }

// local checks that rel is a path the daemon may reach: relative, inside
// the workspace by its text, not in sessions/. os.Root checks the rest
// (links) in the kernel.
func (f *Files) local(rel string) (string, error) {
	p := filepath.FromSlash(rel)
	switch {
	case rel == "" || strings.IndexByte(rel, 0) >= 0 || len(rel) > maxPathBytes:
		return "", &PathError{Path: rel, Err: ErrInvalid}
	case !filepath.IsLocal(p):
		return "", &PathError{Path: rel, Err: ErrOutside}
	case isSessions(filepath.Clean(p)):
		return "", &PathError{Path: rel, Err: ErrSessions}
	}
	return filepath.Clean(p), nil
}

// kind is what open accepts.
type kind uint8

const (
	regular kind = iota
	directory
	either // a regular file or a directory (the fs.FS view)
)

// open opens rel through the root with flag|O_NONBLOCK|O_NOCTTY and
// checks the open file: inside the workspace by its real path, one link,
// and of the kind wanted.
func (f *Files) open(rel string, flag int, perm fs.FileMode, want kind) (*os.File, fs.FileInfo, error) {
	p, err := f.local(rel)
	if err != nil {
		return nil, nil, err
	}
	// O_TRUNC only after the checks (see Root.OpenFile).
	trunc := flag&os.O_TRUNC != 0
	flag &^= os.O_TRUNC
	file, err := f.root.root.OpenFile(p, flag|oNonblock, perm)
	if err != nil {
		if isNoReader(err) {
			// A FIFO opened for writing with no reader.
			return nil, nil, &PathError{Path: rel, Detail: "a FIFO", Err: ErrNotRegular}
		}
		return nil, nil, f.root.fsError(rel, err)
	}
	fi, err := file.Stat()
	if err == nil {
		err = checkKind(rel, fi, want)
	}
	if err == nil {
		err = f.root.checkOpen(rel, file)
	}
	if err == nil && trunc {
		err = file.Truncate(0)
	}
	if err != nil {
		_ = file.Close()
		return nil, nil, err
	}
	return file, fi, nil
}

// checkKind refuses anything but the kind wanted.
func checkKind(rel string, fi fs.FileInfo, want kind) error {
	switch {
	case want != regular && fi.IsDir(), want != directory && fi.Mode().IsRegular():
		return nil
	case want == directory:
		return &PathError{Path: rel, Detail: kindOf(fi.Mode()), Err: errors.New("not a directory")}
	}
	return &PathError{Path: rel, Detail: kindOf(fi.Mode()), Err: ErrNotRegular}
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// Open opens the regular file rel for reading; fi is its fstat.
func (f *Files) Open(rel string) (*os.File, fs.FileInfo, error) {
	return f.open(rel, os.O_RDONLY, 0, regular)
}

// ReadFile reads the regular file rel whole, refusing one of more than max
// bytes (ErrTooLarge) without reading it.
func (f *Files) ReadFile(rel string, max int64) ([]byte, error) {
	file, fi, err := f.Open(rel)
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }()
	if fi.Size() > max {
		return nil, tooLarge(rel, fi.Size(), max)
	}
	// One byte past max: a file that grew since the fstat is caught too.
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, f.root.fsError(rel, err)
	}
	if int64(len(data)) > max {
		return nil, &PathError{Path: rel, Detail: "it grew past " + bytesize.Format(max), Err: ErrTooLarge}
	}
	return data, nil
}

func tooLarge(rel string, size, max int64) error {
	return &PathError{Path: rel, Detail: fmt.Sprintf("%s, the cap is %s", bytesize.Format(size), bytesize.Format(max)), Err: ErrTooLarge}
}

// ReadText reads rel as UTF-8 text of at most max bytes, for a prompt. A
// missing file reads as "" (exists false).
func (f *Files) ReadText(rel string, max int64) (text string, exists bool, err error) {
	data, err := f.ReadFile(rel, max)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", true, err
	}
	if !utf8.Valid(data) || slices.Contains(data, 0) {
		return "", true, &PathError{Path: rel, Err: ErrNotText}
	}
	return string(data), true, nil
}

// Stat returns rel's information, following links only inside the
// workspace; it opens nothing, so it is what the prompt's cache asks on
// every turn.
func (f *Files) Stat(rel string) (fs.FileInfo, error) {
	p, err := f.local(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.root.root.Stat(p)
	if err != nil {
		return nil, f.root.fsError(rel, err)
	}
	return fi, nil
}

// Stamp returns rel's information for change detection only (the
// prompt's cache asks it for every file on every turn): one stat(2) of the
// path, which the kernel resolves alone, so it is as cheap as os.Stat. It
// may follow a link out of the workspace, which reveals nothing (size and
// time are compared, never shown) and cannot block on a FIFO, since
// nothing is opened; whatever is then read goes through Open and its
// checks.
func (f *Files) Stamp(rel string) (fs.FileInfo, error) {
	p, err := f.local(rel)
	if err != nil {
		return nil, err
	}
	return os.Stat(filepath.Join(f.root.dir, p))
}

// Lstat returns rel's own information (a link is not followed).
func (f *Files) Lstat(rel string) (fs.FileInfo, error) {
	p, err := f.local(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.root.root.Lstat(p)
	if err != nil {
		return nil, f.root.fsError(rel, err)
	}
	return fi, nil
}

// ReadDir lists the directory rel sorted by name; entries are described by
// their own type (a link is a link).
func (f *Files) ReadDir(rel string) ([]fs.DirEntry, error) {
	d, _, err := f.open(rel, os.O_RDONLY|oDirectory, 0, directory)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, f.root.fsError(rel, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// OpenDir opens the directory rel itself, never through a link at its last
// component, for a caller that works below the descriptor (the start-up
// move of sessions/, which is otherwise refused).
func (f *Files) OpenDir(rel string) (*os.File, error) {
	if strings.ContainsRune(rel, '/') || !filepath.IsLocal(rel) {
		return nil, &PathError{Path: rel, Err: ErrInvalid}
	}
	d, err := f.root.root.OpenFile(rel, os.O_RDONLY|oDirectory|oNoFollow|oNonblock, 0)
	if err != nil {
		return nil, f.root.fsError(rel, err)
	}
	fi, err := d.Stat()
	if err == nil {
		err = checkKind(rel, fi, directory)
	}
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// MkdirAll creates the directory rel and its parents (perm).
func (f *Files) MkdirAll(rel string, perm fs.FileMode) error {
	p, err := f.local(rel)
	if err != nil {
		return err
	}
	if err := f.root.root.MkdirAll(p, perm); err != nil {
		return f.root.fsError(rel, err)
	}
	return nil
}

// WriteFileAtomic replaces rel with data by write, fsync and rename
// (Root.WriteFileAtomic), creating its directory (0700). What was there —
// a link, a FIFO — is replaced, never written through.
func (f *Files) WriteFileAtomic(rel string, data []byte, perm fs.FileMode) error {
	p, err := f.local(rel)
	if err != nil {
		return err
	}
	if dir := path.Dir(filepath.ToSlash(p)); dir != "." {
		if err := f.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	return f.root.writeAtomicAt(rel, p, data, perm)
}

// OpenAppend opens the regular file rel for appending (O_RDWR, so its tail
// can be read), creating it with perm.
func (f *Files) OpenAppend(rel string, perm fs.FileMode) (*os.File, error) {
	file, _, err := f.open(rel, os.O_RDWR|os.O_APPEND|os.O_CREATE, perm, regular)
	return file, err
}

// Create creates the new file rel for writing; it fails when anything is
// there (O_EXCL never follows a link).
func (f *Files) Create(rel string, perm fs.FileMode) (*os.File, error) {
	file, _, err := f.open(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm, regular)
	return file, err
}

// Remove removes rel (a link itself, never its target).
func (f *Files) Remove(rel string) error {
	p, err := f.local(rel)
	if err != nil {
		return err
	}
	if err := f.root.root.Remove(p); err != nil {
		return f.root.fsError(rel, err)
	}
	return nil
}

// Guard holds the lock of the guarded file rel (see LockOf) until release
// is called; for other files it holds nothing. The lock file is opened like
// every other file: a link or a FIFO planted there fails the lock.
func (f *Files) Guard(rel string) (release func(), err error) {
	lock, ok := LockOf(rel)
	if !ok {
		return func() {}, nil
	}
	if err := f.MkdirAll(path.Dir(lock), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock, err)
	}
	file, _, err := f.open(lock, os.O_CREATE|os.O_RDWR, 0o600, regular)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock, err)
	}
	return filelock.Hold(file)
}

// Skip logs that rel was left out because of err, once per problem: the
// same problem of the same file is logged again only after an hour, so a
// bad file does not fill the log on every turn. doctor reports it too
// (Inspect).
func (f *Files) Skip(rel, what string, err error) {
	text := err.Error()
	now := time.Now()
	f.mu.Lock()
	last, seen := f.warned[rel]
	quiet := seen && last.text == text && now.Sub(last.at) < rewarn
	if !quiet {
		f.warned[rel] = warning{text: text, at: now}
	}
	f.mu.Unlock()
	if !quiet {
		f.log.Warn("workspace file left out", zap.String("file", rel), zap.String("what", what), zap.Error(err),
			zap.String("fix", "replace it with a regular UTF-8 file inside the workspace; `nanobot doctor` lists every such file"))
	}
}

// Problem says in a few words why err refused a file, for a note a person
// or the model reads: no path beyond the one given, no content.
func Problem(err error) string {
	var pe *PathError
	detail := ""
	if errors.As(err, &pe) {
		detail = pe.Detail
	}
	switch {
	case errors.Is(err, ErrOutside):
		return "a link out of the workspace"
	case errors.Is(err, ErrNotRegular):
		return "not a regular file (" + strings.TrimPrefix(detail, "a ") + ")"
	case errors.Is(err, ErrTooLarge):
		return "too large (" + detail + ")"
	case errors.Is(err, ErrNotText):
		return "not UTF-8 text"
	case errors.Is(err, ErrHardLink):
		return "a file with several hard links"
	case errors.Is(err, ErrSessions):
		return "in sessions/"
	case errors.Is(err, syscall.ELOOP):
		return "a loop of links"
	}
	return "unreadable"
}

// FS returns the workspace directory dir as an fs.FS, for a reader that
// takes one (the skills loader). Open, ReadDir and ReadFile go through f;
// ReadFile reads UTF-8 text under MaxPromptFileBytes and logs a refused
// file once (Skip). A missing dir is an empty one.
func (f *Files) FS(dir string) fs.FS { return filesFS{f: f, dir: dir} }

type filesFS struct {
	f   *Files
	dir string
}

func (v filesFS) rel(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return path.Join(v.dir, name), nil
}

func (v filesFS) Open(name string) (fs.File, error) {
	rel, err := v.rel("open", name)
	if err != nil {
		return nil, err
	}
	file, _, err := v.f.open(rel, os.O_RDONLY, 0, either)
	if err != nil {
		return nil, err
	}
	return file, nil
}

func (v filesFS) ReadDir(name string) ([]fs.DirEntry, error) {
	rel, err := v.rel("readdir", name)
	if err != nil {
		return nil, err
	}
	entries, err := v.f.ReadDir(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.f.Skip(rel, "prompt", err)
	}
	return entries, err
}

func (v filesFS) ReadFile(name string) ([]byte, error) {
	rel, err := v.rel("readfile", name)
	if err != nil {
		return nil, err
	}
	text, ok, err := v.f.ReadText(rel, MaxPromptFileBytes)
	switch {
	case err != nil:
		v.f.Skip(rel, "prompt", err)
		return nil, err
	case !ok:
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(text), nil
}

// OldSessions returns what is at sessions/ in the workspace, not following
// a link: an old version's chat logs, which the daemon moves out at start
// (session.MoveDir), or a link a command planted, which it leaves alone.
func (f *Files) OldSessions() (fs.FileInfo, error) {
	fi, err := f.root.root.Lstat(SessionsDir)
	if err != nil {
		return nil, f.root.fsError(SessionsDir, err)
	}
	return fi, nil
}
