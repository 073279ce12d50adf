package matrix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// prepare fetches the image, voice message or file of an admitted message
// (capped at max_media_bytes): an image becomes an image part, a voice
// message its transcript, anything else a file saved under
// <workspace>/inbox/ as a file_ref part. Failures become notes for the
// model, never errors: what the sender typed still reaches the agent.
func (c *Channel) prepare(ctx context.Context, evt *event.Event, content *event.MessageEventContent, msg *bus.InboundMessage) error {
	name := inbox.SafeName(content.GetFileName())
	mimeType := contentMIME(content)
	note := func(s string) { msg.Content = strings.TrimSpace(msg.Content + "\n" + s) }
	if content.File != nil && content.URL == "" {
		note(fmt.Sprintf("[attachment %s is end-to-end encrypted and could not be read]", name))
		return nil
	}
	if size := int64(content.GetInfo().Size); size > c.cfg.MaxMediaBytes {
		note(fmt.Sprintf("[attachment %s (%s) not downloaded: larger than the %s limit]",
			name, bytesize.Format(size), bytesize.Format(c.cfg.MaxMediaBytes)))
		return nil
	}
	data, err := c.download(ctx, content.URL)
	if err != nil {
		c.log.Warn("attachment download failed", zap.String("file", name), zap.Error(err))
		note(fmt.Sprintf("[attachment %s could not be downloaded]", name))
		return nil
	}
	switch {
	case content.MsgType == event.MsgAudio && (content.MSC3245Voice != nil || c.deps.Transcriber != nil):
		c.voice(ctx, evt, name, mimeType, data, msg, note)
	case content.MsgType == event.MsgImage && isImage(mimeType):
		msg.Media = append(msg.Media, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: mimeType, Data: data}})
	default:
		c.saveFile(evt, name, content.GetFileName(), mimeType, data, msg, note)
	}
	return nil
}

func (c *Channel) voice(ctx context.Context, evt *event.Event, name, mimeType string, data []byte, msg *bus.InboundMessage, note func(string)) {
	if c.deps.Transcriber == nil {
		note("[voice message: transcription is not configured]")
		c.saveFile(evt, name, name, mimeType, data, msg, note)
		return
	}
	text, err := c.deps.Transcriber.Transcribe(ctx, name, mimeType, data)
	if err != nil {
		c.log.Warn("voice transcription failed", zap.String("file", name), zap.Error(err))
		note("[voice message: transcription failed]")
		c.saveFile(evt, name, name, mimeType, data, msg, note)
		return
	}
	note("[voice message] " + strings.TrimSpace(text))
}

// saveFile writes a received file under <workspace>/inbox/; the name
// carries the event id, so nothing is overwritten.
func (c *Channel) saveFile(evt *event.Event, name, original, mimeType string, data []byte, msg *bus.InboundMessage, note func(string)) {
	if c.deps.Workspace == "" {
		note(fmt.Sprintf("[file %s received but not saved: no workspace]", name))
		return
	}
	rel, err := inbox.Save(c.deps.Workspace, "matrix-"+inbox.SafeName(strings.TrimPrefix(evt.ID.String(), "$"))+"-"+name, data)
	if err != nil {
		c.log.Error("saving received file", zap.String("path", rel), zap.Error(err))
		note(fmt.Sprintf("[file %s could not be saved]", name))
		return
	}
	msg.Media = append(msg.Media, llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{
		Path: rel, MIME: mimeType, Size: int64(len(data)), Name: original}})
}

// download fetches an mxc:// URI through the homeserver's authenticated
// media API, refusing more than max_media_bytes whatever was announced.
func (c *Channel) download(ctx context.Context, uri id.ContentURIString) ([]byte, error) {
	mxc, err := uri.Parse()
	if err != nil {
		return nil, fmt.Errorf("media uri %q: %w", uri, err)
	}
	resp, err := c.cli.Download(ctx, mxc)
	if err != nil {
		return nil, fmt.Errorf("media download: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxMediaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("media read: %w", err)
	}
	if int64(len(data)) > c.cfg.MaxMediaBytes {
		return nil, fmt.Errorf("media larger than %d bytes", c.cfg.MaxMediaBytes)
	}
	return data, nil
}

func contentMIME(content *event.MessageEventContent) string {
	if mt, _, err := mime.ParseMediaType(content.GetInfo().MimeType); err == nil && mt != "" {
		return mt
	}
	if mt := mime.TypeByExtension(filepath.Ext(content.GetFileName())); mt != "" {
		mt, _, _ = mime.ParseMediaType(mt)
		return mt
	}
	return "application/octet-stream"
}

// isImage reports the image formats vision models accept.
func isImage(mimeType string) bool {
	switch mimeType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// upload is one outbound attachment, ready to post.
type upload struct {
	name, mime string
	data       []byte
}

// outboundFiles reads the image and file_ref parts to upload. Paths are
// resolved inside the workspace (no link out) and never reach sessions/.
func (c *Channel) outboundFiles(parts []llm.Part) ([]upload, error) {
	var out []upload
	for i, p := range parts {
		switch {
		case p.Kind == llm.PartImage && p.Image != nil && len(p.Image.Data) > 0:
			ext := ".png"
			if exts, _ := mime.ExtensionsByType(p.Image.MIME); len(exts) > 0 {
				ext = exts[0]
			}
			out = append(out, upload{name: fmt.Sprintf("image-%d%s", i+1, ext), mime: p.Image.MIME, data: p.Image.Data})
		case p.Kind == llm.PartImage && p.Image != nil && p.Image.Path != "":
			u, err := c.workspaceFile(p.Image.Path, "", p.Image.MIME)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		case p.Kind == llm.PartFileRef && p.File != nil:
			u, err := c.workspaceFile(p.File.Path, p.File.Name, p.File.MIME)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
	return out, nil
}

func (c *Channel) workspaceFile(p, name, mimeType string) (upload, error) {
	if c.deps.Workspace == "" {
		return upload{}, fmt.Errorf("file %s: no workspace configured", p)
	}
	rel := p
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(c.deps.Workspace, p)
		if err != nil {
			return upload{}, fmt.Errorf("file %s: outside the workspace", p)
		}
		rel = r
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	if !filepath.IsLocal(rel) || rel == "sessions" || strings.HasPrefix(rel, "sessions/") {
		return upload{}, fmt.Errorf("file %s: not allowed (outside the workspace or in sessions/)", p)
	}
	files, err := workspace.OpenFiles(c.deps.Workspace, nil)
	if err != nil {
		return upload{}, fmt.Errorf("open workspace: %w", err)
	}
	defer files.Close()
	data, err := files.ReadFile(rel, c.cfg.MaxMediaBytes)
	switch {
	case errors.Is(err, workspace.ErrTooLarge):
		return upload{}, fmt.Errorf("file %s: over the %s upload limit", p, bytesize.Format(c.cfg.MaxMediaBytes))
	case errors.Is(err, os.ErrNotExist):
		return upload{}, fmt.Errorf("file %s: no such file", p)
	case err != nil:
		return upload{}, fmt.Errorf("file %s: %w", p, err)
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
	return upload{name: inbox.SafeName(name), mime: mimeType, data: data}, nil
}
