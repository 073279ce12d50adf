// Package workspace manages the agent's workspace directory: it installs the
// template into a new workspace, confines the file tools to it (Root), and
// is the daemon's one access to it (Files, daemon.go): every file the daemon
// itself reads or writes there is listed in DaemonFiles and reached through
// Files, which never follows a link out, opens only regular files without
// blocking and caps every read.
//
// The file tools' confinement (docs/tools.md) works in three layers, each closing a gap the
// one before cannot:
//
//  1. Resolve checks the path's text and then follows every symlink in it the
//     way the kernel would, so "link/x" is judged by where it really leads.
//  2. Files inside the workspace are opened through an os.Root, which resolves
//     the path again in the kernel, component by component, and refuses to
//     leave the workspace. A symlink swapped in after step 1 (check-then-open
//     race) therefore cannot lead outside.
//  3. After opening, the open file itself is checked: on Linux its real path
//     (from /proc/self/fd) must not lie in sessions/ and, when restricted, must
//     lie in the workspace; a regular file with more than one hard link is
//     refused when restricted, because a hard link cannot be told apart from
//     the original by any path check.
//
// sessions/ holds the chat logs. It is refused in every mode, by any spelling
// (case-insensitive, through symlinks, or via the real path of the open file).
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Sentinel errors, wrapped in a *PathError. Their text is written for a model:
// it says what was refused and, read with the path, what to do instead.
var (
	// ErrOutside: the path leads out of the workspace while the workspace
	// restriction is on. Use a path inside the workspace.
	ErrOutside = errors.New("path escapes the workspace")
	// ErrSessions: the path leads into sessions/, which no tool may touch.
	ErrSessions = errors.New("sessions/ holds the chat logs and is off limits to tools")
	// ErrInvalid: the path cannot be a file name (empty, NUL byte, too long,
	// ~user).
	ErrInvalid = errors.New("invalid path")
	// ErrHardLink: the file has more than one hard link, so it may be the same
	// file as one outside the workspace or in sessions/.
	ErrHardLink = errors.New("file has several hard links and may be a file outside the workspace; copy it instead of linking")
	// ErrTooLarge: the file is bigger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// PathError reports a refused or failed path. Error() reads like
// "path escapes the workspace: ../x".
type PathError struct {
	// Path is the path as the caller gave it.
	Path string
	// Detail explains further, e.g. which symlink led where; may be empty.
	Detail string
	Err    error
}

func (e *PathError) Error() string {
	s := e.Err.Error() + ": " + e.Path
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func (e *PathError) Unwrap() error { return e.Err }

// Limits on a path's length. The kernel refuses longer ones too, but with an
// error a model cannot act on.
const (
	maxPathBytes = 4096
	maxNameBytes = 255
	// maxLinks bounds symlink chains, as the kernel's ELOOP does.
	maxLinks = 40
)

// SessionsDir is the workspace subdirectory no tool may touch: older
// versions kept the chat logs there. The daemon now keeps them outside the
// workspace (agents.sessions_dir) and moves an old one out at start
// (session.MoveDir); the guard stays for whatever that move leaves.
const SessionsDir = "sessions"

// Options configure a Root.
type Options struct {
	// Restrict confines paths to the workspace (tools.restrict_to_workspace).
	// sessions/ is refused either way.
	Restrict bool
	// Home is what "~" expands to; empty means os.UserHomeDir().
	Home string
	// SessionsDir is where the session store keeps the chat logs
	// (agents.sessions_dir, outside the workspace). It is refused like
	// sessions/, in every mode: unrestricted tools may reach files outside
	// the workspace, but never the chat logs. Empty: only sessions/.
	SessionsDir string
}

// Root is the workspace directory, opened for confined access. It is safe
// for concurrent use. Close it when done.
type Root struct {
	dir      string // absolute, symlinks resolved
	root     *os.Root
	restrict bool
	home     string
	// sessions is Options.SessionsDir, absolute and clean ("" if none).
	sessions string
	// afterResolve, when set by a test, runs between the path check and the
	// open, to stage a check-then-open race deterministically.
	afterResolve func()
}

// OpenRoot opens the workspace directory dir, which must exist.
func OpenRoot(dir string, opts Options) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	// The workspace itself may sit behind a symlink (~/.nanobot -> /data);
	// every later comparison is against its real location.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	home := opts.Home
	if home == "" {
		// No home is not fatal: "~" is then refused with a clear error.
		home, _ = os.UserHomeDir()
	}
	if home != "" {
		home = filepath.Clean(home)
	}
	var sessions string
	if opts.SessionsDir != "" {
		if sessions, err = filepath.Abs(opts.SessionsDir); err != nil {
			_ = root.Close()
			return nil, fmt.Errorf("sessions dir %s: %w", opts.SessionsDir, err)
		}
	}
	return &Root{dir: real, root: root, restrict: opts.Restrict, home: home, sessions: sessions}, nil
}

// Close releases the workspace directory.
func (r *Root) Close() error { return r.root.Close() }

// Dir is the workspace's absolute path with symlinks resolved.
func (r *Root) Dir() string { return r.dir }

// Restricted reports whether paths are confined to the workspace.
func (r *Root) Restricted() bool { return r.restrict }

// Resolve checks p and returns where it leads: a path relative to the
// workspace (with symlinks resolved, "." for the workspace itself) when it
// is inside, or a clean absolute path when it is outside and the workspace is
// not restricted. Relative paths are taken from the workspace; "~" and "~/x"
// expand to the home directory; ".." is applied to the text of p. Paths that
// do not exist yet resolve too (for files about to be written).
//
// Errors are *PathError wrapping ErrOutside, ErrSessions or ErrInvalid, or the
// file system's error when a component cannot be examined.
func (r *Root) Resolve(p string) (string, error) {
	abs, err := r.absolute(p)
	if err != nil {
		return "", err
	}
	real, err := evalSymlinks(abs)
	if err != nil {
		return "", &PathError{Path: p, Err: err}
	}
	rel, inside := within(r.dir, real)
	if inside && isSessions(rel) || r.inRealSessions(real) {
		return "", &PathError{Path: p, Err: ErrSessions}
	}
	if inside {
		return rel, nil
	}
	if r.restrict {
		return "", &PathError{Path: p, Detail: r.escapeDetail(abs, real), Err: ErrOutside}
	}
	return real, nil
}

// absolute validates p and makes it a clean absolute path, checking the text
// alone: sessions/ by any letter case, and ".." leaving the workspace.
func (r *Root) absolute(p string) (string, error) {
	invalid := func(detail string) error { return &PathError{Path: p, Detail: detail, Err: ErrInvalid} }
	switch {
	case p == "":
		return "", invalid("empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", &PathError{Path: strings.ReplaceAll(p, "\x00", `\x00`), Detail: "contains a NUL byte", Err: ErrInvalid}
	case len(p) > maxPathBytes:
		return "", &PathError{Path: p[:64] + "...", Detail: fmt.Sprintf("%d bytes, more than %d", len(p), maxPathBytes), Err: ErrInvalid}
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if r.home == "" {
			return "", invalid("no home directory is known to expand ~")
		}
		p = r.home + p[1:]
	} else if strings.HasPrefix(p, "~") {
		return "", invalid("only ~ and ~/ are expanded, not ~user")
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.dir, abs)
	}
	abs = filepath.Clean(abs)
	if len(abs) > maxPathBytes {
		return "", invalid(fmt.Sprintf("%d bytes once made absolute, more than %d", len(abs), maxPathBytes))
	}
	for _, name := range strings.Split(abs, string(filepath.Separator)) {
		if len(name) > maxNameBytes {
			return "", invalid(fmt.Sprintf("a name is %d bytes, more than %d", len(name), maxNameBytes))
		}
	}
	rel, inside := within(r.dir, abs)
	if inside && isSessions(rel) {
		return "", &PathError{Path: p, Err: ErrSessions}
	}
	if _, in := within(r.sessions, abs); r.sessions != "" && in {
		return "", &PathError{Path: p, Err: ErrSessions}
	}
	if !inside && r.restrict && !filepath.IsAbs(p) {
		// A relative path that leaves is a ".." escape; say so plainly.
		return "", &PathError{Path: p, Err: ErrOutside}
	}
	return abs, nil
}

func (r *Root) escapeDetail(abs, real string) string {
	if _, inside := within(r.dir, abs); inside {
		return "a symlink in it leads to " + real
	}
	return "the workspace is " + r.dir
}

// inRealSessions reports whether real lies in the real location of sessions/
// (which matters when sessions/ itself is a symlink to somewhere else) or of
// the sessions dir. Both are resolved at each call: a link on their way may
// have changed.
func (r *Root) inRealSessions(real string) bool {
	for _, dir := range r.sessionDirs() {
		sess, err := evalSymlinks(dir)
		if err != nil {
			continue
		}
		if _, in := within(sess, real); in {
			return true
		}
	}
	return false
}

// sessionDirs are the directories holding chat logs: sessions/ and the
// sessions dir.
func (r *Root) sessionDirs() []string {
	dirs := []string{filepath.Join(r.dir, SessionsDir)}
	if r.sessions != "" {
		dirs = append(dirs, r.sessions)
	}
	return dirs
}

// isSessions reports whether the workspace-relative path rel is sessions/ or
// below it. The comparison ignores letter case because on case-insensitive
// file systems (macOS, some NAS shares) "Sessions" is the same directory.
func isSessions(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return strings.EqualFold(first, SessionsDir)
}

// within reports whether the clean absolute path p is base or lies below it,
// and returns p relative to base.
func within(base, p string) (string, bool) {
	if p == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if !strings.HasPrefix(p, prefix) {
		return "", false
	}
	return p[len(prefix):], true
}

// evalSymlinks resolves every symlink in the clean absolute path abs the way
// the kernel does: a link's target is read relative to the link's directory,
// and ".." in a target climbs from the real directory it is in. The part of
// abs that does not exist yet is kept as written, so a file about to be
// created resolves to the real location of its parent.
func evalSymlinks(abs string) (string, error) {
	sep := string(filepath.Separator)
	resolved := sep
	rest := splitPath(abs)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, name)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
				return filepath.Join(append([]string{next}, rest...)...), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many levels of symbolic links at %s", next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = sep
		}
		rest = append(splitPath(target), rest...)
	}
	return resolved, nil
}

func splitPath(p string) []string {
	var out []string
	for _, name := range strings.Split(p, string(filepath.Separator)) {
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}
