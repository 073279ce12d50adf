package channels

import (
	"errors"
	"fmt"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Upload is a file a reply attaches, read and ready to post.
type Upload struct {
	Name, MIME string
	Data       []byte
	// Image: sent as a picture where the platform tells pictures apart.
	Image bool
}

// UploadOf reads what part p (the i-th of a reply) attaches: an image given
// inline as it is, an image or a file_ref in the workspace through the
// daemon's confined access (workspace.Files: no link out, no FIFO or
// device, nothing over limit read), never from sessions/. It reports false
// for a part that attaches nothing an adapter can upload (text, an image
// known only by its URL). Every adapter reads a reply's files here, so the
// rule on what a model may send out holds on every channel.
func UploadOf(p llm.Part, i int, workspaceDir string, limit int64) (Upload, bool, error) {
	switch {
	case p.Kind == llm.PartImage && p.Image != nil && len(p.Image.Data) > 0:
		ext := ".png"
		if exts, _ := mime.ExtensionsByType(p.Image.MIME); len(exts) > 0 {
			ext = exts[0]
		}
		return Upload{Name: fmt.Sprintf("image-%d%s", i+1, ext), MIME: p.Image.MIME, Data: p.Image.Data, Image: true}, true, nil
	case p.Kind == llm.PartImage && p.Image != nil && p.Image.Path != "":
		u, err := workspaceUpload(workspaceDir, p.Image.Path, "", p.Image.MIME, limit)
		u.Image = true
		return u, true, err
	case p.Kind == llm.PartFileRef && p.File != nil:
		u, err := workspaceUpload(workspaceDir, p.File.Path, p.File.Name, p.File.MIME, limit)
		return u, true, err
	}
	return Upload{}, false, nil
}

func workspaceUpload(dir, p, name, mimeType string, limit int64) (Upload, error) {
	if dir == "" {
		return Upload{}, fmt.Errorf("file %s: no workspace configured", p)
	}
	rel := p
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return Upload{}, fmt.Errorf("file %s: outside the workspace", p)
		}
		rel = r
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	if !filepath.IsLocal(rel) || rel == "sessions" || strings.HasPrefix(rel, "sessions/") {
		return Upload{}, fmt.Errorf("file %s: not allowed (outside the workspace or in sessions/)", p)
	}
	files, err := workspace.OpenFiles(dir, nil)
	if err != nil {
		return Upload{}, fmt.Errorf("open workspace: %w", err)
	}
	defer files.Close()
	data, err := files.ReadFile(rel, limit)
	switch {
	case errors.Is(err, workspace.ErrTooLarge):
		return Upload{}, fmt.Errorf("file %s: over the %s upload limit", p, bytesize.Format(limit))
	case errors.Is(err, os.ErrNotExist):
		return Upload{}, fmt.Errorf("file %s: no such file", p)
	case err != nil:
		return Upload{}, fmt.Errorf("file %s: %w", p, err)
	}
	if name == "" {
		name = path.Base(rel)
	}
	if mimeType == "" {
		mimeType = mime.TypeByExtension(path.Ext(name))
	}
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	return Upload{Name: inbox.SafeName(name), MIME: mimeType, Data: data}, nil
}
