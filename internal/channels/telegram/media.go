package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// errTooLarge refuses a file over max_media_bytes.
var errTooLarge = errors.New("file too large")

// prepareMedia fetches what the agent needs from msgs' attachments: photos
// as image parts, the thumbnail of a video, animation or video message as
// an image part (the media itself is described), documents saved under <workspace>/inbox/ as file_ref
// parts, voice and audio transcribed into the text. It runs only for
// senders the gate let in.
func (c *Channel) prepareMedia(ctx context.Context, msgs []*models.Message, in *bus.InboundMessage) error {
	var notes []string
	told := false // the sender was told already why nothing came through
	for _, m := range msgs {
		if len(m.Photo) > 0 {
			part, err := c.photo(ctx, m.Photo)
			if err != nil {
				notes = append(notes, c.mediaNote("photo", err))
			} else {
				in.Media = append(in.Media, part)
			}
		}
		if thumb, what := thumbnail(m); thumb != nil {
			// A model takes images, not video: the still frame Telegram made
			// is what it can see of one (docs/channels.md).
			if part, err := c.photo(ctx, []models.PhotoSize{*thumb}); err != nil {
				c.log.Info("thumbnail not downloaded; the "+what+" is only described", zap.String("error", c.scrub(err.Error())))
			} else {
				in.Media = append(in.Media, part)
				notes = append(notes, "[the picture is the "+what+"'s thumbnail: one still frame, not the "+what+" itself]")
			}
		}
		if d := m.Document; d != nil {
			part, err := c.document(ctx, m, d)
			if err != nil {
				notes = append(notes, c.mediaNote("file "+d.FileName, err))
			} else {
				in.Media = append(in.Media, part)
			}
		}
		if m.Voice != nil || m.Audio != nil {
			text, err := c.transcribe(ctx, m)
			switch {
			case errors.Is(err, errTranscriptionOff) && m.Voice == nil:
				notes = append(notes, audioItem(m.Audio).String()) // music, a recording: said what it is
			case errors.Is(err, errTranscriptionOff):
				told = true
				c.tell(ctx, in, "I can't listen to voice messages: transcription is off. Please type your message.")
			case err != nil:
				notes = append(notes, c.mediaNote("voice message", err))
			default:
				in.Content = strings.TrimSpace("[voice message] " + text + "\n\n" + in.Content)
			}
		}
	}
	if len(notes) > 0 {
		in.Content = strings.TrimSpace(in.Content + "\n\n" + strings.Join(notes, "\n"))
	}
	if told && strings.TrimSpace(in.Content) == "" && len(in.Media) == 0 {
		return channels.ErrAnswered
	}
	return nil
}

// mediaNote logs a failed attachment and returns the line the agent sees
// in its place, so it can tell the user.
func (c *Channel) mediaNote(what string, err error) string {
	if errors.Is(err, errTooLarge) {
		return fmt.Sprintf("[the %s was not downloaded: it is larger than the %s limit]", what, bytesize.Format(c.cfg.MaxMediaBytes))
	}
	c.log.Warn("attachment not downloaded", zap.String("what", what), zap.String("error", c.scrub(err.Error())))
	return fmt.Sprintf("[the %s could not be downloaded]", what)
}

// tell sends a short notice to the sender from the channel layer.
func (c *Channel) tell(ctx context.Context, in *bus.InboundMessage, text string) {
	err := c.deps.Bus.PublishOutbound(ctx, bus.OutboundMessage{Channel: Name, ChatID: in.ChatID, Kind: bus.KindMessage,
		Content: text, ReplyTo: in.MessageID, Metadata: in.Metadata})
	if err != nil {
		c.log.Warn("notice not queued", zap.Error(err))
	}
}

// thumbnail is the still frame of m's video, animation or video message,
// and what it is a frame of; nil when m has none.
func thumbnail(m *models.Message) (*models.PhotoSize, string) {
	switch {
	case m.Video != nil && m.Video.Thumbnail != nil:
		return m.Video.Thumbnail, "video"
	case m.Animation != nil && m.Animation.Thumbnail != nil:
		return m.Animation.Thumbnail, "animation"
	case m.VideoNote != nil && m.VideoNote.Thumbnail != nil:
		return m.VideoNote.Thumbnail, "video message"
	}
	return nil, ""
}

// photo downloads the largest size of a photo that fits the cap.
func (c *Channel) photo(ctx context.Context, sizes []models.PhotoSize) (llm.Part, error) {
	best := -1
	for i, p := range sizes {
		if int64(p.FileSize) > c.cfg.MaxMediaBytes {
			continue
		}
		if best < 0 || p.Width*p.Height > sizes[best].Width*sizes[best].Height {
			best = i
		}
	}
	if best < 0 {
		return llm.Part{}, errTooLarge
	}
	data, err := c.download(ctx, sizes[best].FileID)
	if err != nil {
		return llm.Part{}, err
	}
	mime := http.DetectContentType(data)
	if !strings.HasPrefix(mime, "image/") {
		mime = "image/jpeg" // Telegram re-encodes photos as JPEG
	}
	return llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: mime, Data: data}}, nil
}

// document saves a document under <workspace>/inbox/ and refers to it.
func (c *Channel) document(ctx context.Context, m *models.Message, d *models.Document) (llm.Part, error) {
	if d.FileSize > c.cfg.MaxMediaBytes {
		return llm.Part{}, errTooLarge
	}
	if c.deps.Workspace == "" {
		return llm.Part{}, errors.New("no workspace to save files in")
	}
	data, err := c.download(ctx, d.FileID)
	if err != nil {
		return llm.Part{}, err
	}
	name := fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102-150405"), m.ID, inbox.SafeName(d.FileName))
	rel, err := inbox.Save(c.deps.Workspace, name, data)
	if err != nil {
		return llm.Part{}, fmt.Errorf("save %s: %w", name, err)
	}
	mime := d.MimeType
	if mime == "" {
		mime = http.DetectContentType(data)
	}
	return llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{Path: rel, MIME: mime, Size: int64(len(data)), Name: d.FileName}}, nil
}

// download fetches a file by id (getFile, then the file URL), capped.
func (c *Channel) download(ctx context.Context, fileID string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := c.api.GetFile(ctx, &bot.GetFileParams{FileID: fileID})
	if err != nil {
		return nil, fmt.Errorf("getFile: %s", c.scrub(err.Error()))
	}
	if f.FileSize > c.cfg.MaxMediaBytes {
		return nil, errTooLarge
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.api.FileDownloadLink(f), nil)
	if err != nil {
		return nil, fmt.Errorf("download: %s", c.scrub(err.Error()))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download: %s", c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download: HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxMediaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download: %s", c.scrub(err.Error()))
	}
	if int64(len(data)) > c.cfg.MaxMediaBytes {
		return nil, errTooLarge
	}
	return data, nil
}

func (c *Channel) transcribe(ctx context.Context, m *models.Message) (string, error) {
	if c.tx == nil {
		return "", errTranscriptionOff
	}
	id, size, name, mime := "", int64(0), "voice.ogg", "audio/ogg"
	if m.Voice != nil {
		id, size = m.Voice.FileID, m.Voice.FileSize
		if m.Voice.MimeType != "" {
			mime = m.Voice.MimeType
		}
	} else {
		id, size = m.Audio.FileID, m.Audio.FileSize
		if m.Audio.FileName != "" {
			name = m.Audio.FileName
		}
		if m.Audio.MimeType != "" {
			mime = m.Audio.MimeType
		}
	}
	if size > c.cfg.MaxMediaBytes {
		return "", errTooLarge
	}
	data, err := c.download(ctx, id)
	if err != nil {
		return "", err
	}
	return c.tx.Transcribe(ctx, name, mime, data)
}

// errTranscriptionOff: no transcription endpoint is configured.
var errTranscriptionOff = errors.New("transcription is off")
