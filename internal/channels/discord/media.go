package discord

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// media is what the attachments of one inbound message became.
type media struct {
	parts []llm.Part
	// notes are short lines for the model about what could not be fetched.
	notes []string
	// transcript is the text of a voice message.
	transcript string
}

// fetchMedia downloads a message's attachments (each capped at
// max_media_bytes): images become image parts, voice messages are
// transcribed when a transcriber is configured, other files are saved under
// <workspace>/inbox/ as file_ref parts. Failures become notes, never errors:
// the text of the message still reaches the agent.
func (c *Channel) fetchMedia(ctx context.Context, m *discordgo.Message) media {
	var out media
	voice := m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0
	attachments := m.Attachments
	for _, s := range m.MessageSnapshots {
		if s.Message != nil { // a forward's files are in its snapshot
			attachments = append(attachments[:len(attachments):len(attachments)], s.Message.Attachments...)
		}
	}
	for _, a := range attachments {
		if a == nil {
			continue
		}
		name := inbox.SafeName(a.Filename)
		mimeType := attachmentMIME(a)
		if int64(a.Size) > c.cfg.MaxMediaBytes {
			out.notes = append(out.notes, fmt.Sprintf("[attachment %s (%s) not downloaded: larger than the %s limit]",
				name, bytesize.Format(int64(a.Size)), bytesize.Format(c.cfg.MaxMediaBytes)))
			continue
		}
		data, err := c.download(ctx, a.URL)
		if err != nil {
			c.log.Warn("attachment download failed", zap.String("file", name), zap.Error(err))
			out.notes = append(out.notes, fmt.Sprintf("[attachment %s could not be downloaded]", name))
			continue
		}
		switch {
		case voice || (strings.HasPrefix(mimeType, "audio/") && c.deps.Transcriber != nil):
			c.voice(ctx, a, name, mimeType, data, &out)
		case isImage(mimeType):
			out.parts = append(out.parts, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: mimeType, Data: data}})
		default:
			c.saveFile(a, name, mimeType, data, &out)
		}
	}
	return out
}

func (c *Channel) voice(ctx context.Context, a *discordgo.MessageAttachment, name, mimeType string, data []byte, out *media) {
	if c.deps.Transcriber == nil {
		out.notes = append(out.notes, "[voice message: transcription is not configured]")
		c.saveFile(a, name, mimeType, data, out)
		return
	}
	text, err := c.deps.Transcriber.Transcribe(ctx, name, mimeType, data)
	if err != nil {
		c.log.Warn("voice transcription failed", zap.String("file", name), zap.Error(err))
		out.notes = append(out.notes, "[voice message: transcription failed]")
		c.saveFile(a, name, mimeType, data, out)
		return
	}
	out.transcript = strings.TrimSpace(out.transcript + "\n" + text)
}

// saveFile writes a received file under <workspace>/inbox/ and adds a
// file_ref part. The name carries the attachment id, so nothing is ever
// overwritten.
func (c *Channel) saveFile(a *discordgo.MessageAttachment, name, mimeType string, data []byte, out *media) {
	if c.deps.Workspace == "" {
		out.notes = append(out.notes, fmt.Sprintf("[file %s received but not saved: no workspace]", name))
		return
	}
	rel, err := inbox.Save(c.deps.Workspace, "discord-"+a.ID+"-"+name, data)
	if err != nil {
		c.log.Error("saving received file", zap.String("path", rel), zap.Error(err))
		out.notes = append(out.notes, fmt.Sprintf("[file %s could not be saved]", name))
		return
	}
	out.parts = append(out.parts, llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{
		Path: rel, MIME: mimeType, Size: int64(len(data)), Name: a.Filename}})
}

// download fetches an attachment, refusing more than max_media_bytes even
// when the announced size lied.
func (c *Channel) download(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("attachment request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("attachment GET: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("attachment GET: HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxMediaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("attachment read: %w", err)
	}
	if int64(len(data)) > c.cfg.MaxMediaBytes {
		return nil, fmt.Errorf("attachment larger than %d bytes", c.cfg.MaxMediaBytes)
	}
	return data, nil
}

func attachmentMIME(a *discordgo.MessageAttachment) string {
	if mt, _, err := mime.ParseMediaType(a.ContentType); err == nil && mt != "" {
		return mt
	}
	if mt := mime.TypeByExtension(filepath.Ext(a.Filename)); mt != "" {
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

// outboundFiles turns image and file_ref parts into uploads
// (channels.UploadOf: inside the workspace, never sessions/).
func (c *Channel) outboundFiles(parts []llm.Part) ([]*discordgo.File, error) {
	var files []*discordgo.File
	for i, p := range parts {
		u, ok, err := channels.UploadOf(p, i, c.deps.Workspace, c.cfg.MaxMediaBytes)
		if err != nil {
			return nil, err
		}
		if ok {
			files = append(files, &discordgo.File{Name: u.Name, ContentType: u.MIME, Reader: bytes.NewReader(u.Data)})
		}
	}
	return files, nil
}

// imageURLs returns the URLs of image parts that have no bytes or path; they
// are appended to the text and Discord shows a preview.
func imageURLs(parts []llm.Part) []string {
	var urls []string
	for _, p := range parts {
		if p.Kind == llm.PartImage && p.Image != nil && len(p.Image.Data) == 0 && p.Image.Path == "" && p.Image.URL != "" {
			urls = append(urls, p.Image.URL)
		}
	}
	return urls
}
