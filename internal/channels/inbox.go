package channels

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// InboxDir is where received files are saved, relative to the workspace.
const InboxDir = "inbox"

// SaveToInbox writes data as <workspace>/inbox/<name> and returns the path
// relative to the workspace, slash-separated, as file_ref parts carry it.
// name must already be safe (SafeFileName) and unique (callers put the
// platform's message or attachment id in it): the file is created through
// an os.Root, so a symlink cannot lead the write out of the workspace, and
// never overwrites one that exists. Files are 0600: what senders send is
// theirs and the daemon's, nobody else's on the host.
func SaveToInbox(workspace, name string, data []byte) (string, error) {
	rel := path.Join(InboxDir, name)
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return "", fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(InboxDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", InboxDir, err)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", rel, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", rel, err)
	}
	return rel, nil
}

// SafeFileName keeps a sender's file name readable but harmless as a path
// element: letters, digits, '.', '-' and '_' only, no leading dots, at most
// 100 bytes with the extension kept, "file" when nothing is left.
func SafeFileName(name string) string {
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

// HumanBytes writes a size the way the limits are quoted to users.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
