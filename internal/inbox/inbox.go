package inbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Dir is where received files are saved, relative to the workspace.
const Dir = workspace.InboxDir

// maxNameBytes caps a file name Save accepts: far below every file system's
// 255-byte limit, with room for the prefixes callers add.
const maxNameBytes = 160

// Save writes data as <workspace>/inbox/<name> and returns the path
// relative to the workspace, slash-separated, as file_ref parts carry it.
// name must be a plain name — the characters SafeName keeps, no leading
// dot, at most 160 bytes — and unique
// (callers put the platform's message or attachment id in it); any other
// name is refused before the disk is touched. The file is created through
// an os.Root, so a symlink cannot lead the write out of the workspace, and
// never overwrites one that exists. Files are 0600: what senders send is
// theirs and the daemon's, nobody else's on the host.
func Save(ws, name string, data []byte) (string, error) {
	if !plainName(name) {
		return "", fmt.Errorf("inbox: refusing file name %q: not a plain file name", clip(name))
	}
	rel := path.Join(Dir, name)
	root, err := workspace.OpenFiles(ws, nil)
	if err != nil {
		return "", fmt.Errorf("inbox: open workspace: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		return "", fmt.Errorf("inbox: create %s: %w", Dir, err)
	}
	f, err := root.Create(rel, 0o600)
	if err != nil {
		return "", fmt.Errorf("inbox: create %s: %w", rel, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = root.Remove(rel) // a partial file is nobody's
		return "", fmt.Errorf("inbox: write %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("inbox: close %s: %w", rel, err)
	}
	return rel, nil
}

// ErrNotImage means bytes offered as a picture are none of the formats
// vision models take (PNG, JPEG, GIF, WebP). The caller should refuse them
// (the API answers 400) or pass them on as a file, never save them as a
// picture.
var ErrNotImage = errors.New("not a PNG, JPEG, GIF or WebP picture")

// imageTypes maps what http.DetectContentType finds to the extension the
// daemon names the file with.
var imageTypes = map[string]string{
	"image/png":  ".png",
	"image/jpeg": ".jpg",
	"image/gif":  ".gif",
	"image/webp": ".webp",
}

// SniffImage returns the media type of data when its content is a PNG,
// JPEG, GIF or WebP picture; a declared type is never asked, so a sender
// cannot name the type (and with it the file's extension) themselves.
func SniffImage(data []byte) (string, error) {
	mt := http.DetectContentType(data)
	if _, ok := imageTypes[mt]; !ok {
		return "", fmt.Errorf("%w (its content reads as %s)", ErrNotImage, mt)
	}
	return mt, nil
}

// SaveImage saves a picture under a name of the daemon's own,
// img-<UTC time>-<random>.<ext>, with the extension of the type its bytes
// are, and returns the path relative to the workspace and that type. Bytes
// that are no picture are refused with ErrNotImage.
func SaveImage(workspace string, data []byte, now time.Time) (rel, mime string, err error) {
	mime, err = SniffImage(data)
	if err != nil {
		return "", "", err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	name := fmt.Sprintf("img-%s-%s%s", now.UTC().Format("20060102-150405"), hex.EncodeToString(rnd[:]), imageTypes[mime])
	rel, err = Save(workspace, name, data)
	return rel, mime, err
}

// ReadFile reads the workspace file rel (slash-separated, as sessions store
// it) through the daemon's workspace access (workspace.Files), refusing
// files over limit bytes. A path a session holds is data: "..", an absolute
// path, a symlink out of the workspace, a FIFO or a device fails rather than
// reading a file elsewhere or waiting.
func ReadFile(ws, rel string, limit int64) ([]byte, error) {
	root, err := workspace.OpenFiles(ws, nil)
	if err != nil {
		return nil, fmt.Errorf("inbox: open workspace: %w", err)
	}
	defer root.Close()
	data, err := root.ReadFile(rel, limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return data, nil
}

// SafeName keeps a sender's file name readable but harmless as a path
// element: letters, digits, '.', '-' and '_' only, no leading dots, at most
// 100 bytes with the extension kept, "file" when nothing is left.
func SafeName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if len(s) > 100 {
		ext := filepath.Ext(s)
		if len(ext) > 10 {
			ext = ""
		}
		s = s[:100-len(ext)] + ext
	}
	if s == "" {
		s = "file"
	}
	return s
}

// plainName reports whether name is what Save accepts: one path element of
// the characters SafeName keeps, not starting with a dot.
func plainName(name string) bool {
	if name == "" || len(name) > maxNameBytes || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clip shortens a refused name for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
