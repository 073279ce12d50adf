package matrix

import (
	"context"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
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

// outboundFiles reads the image and file_ref parts to upload
// (channels.UploadOf: inside the workspace, never sessions/).
func (c *Channel) outboundFiles(parts []llm.Part) ([]upload, error) {
	var out []upload
	for i, p := range parts {
		u, ok, err := channels.UploadOf(p, i, c.deps.Workspace, c.cfg.MaxMediaBytes)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, upload{name: u.Name, mime: u.MIME, data: u.Data})
		}
	}
	return out, nil
}
