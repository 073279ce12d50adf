package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Transcriber turns a voice message into text.
type Transcriber interface {
	Transcribe(ctx context.Context, filename, mimeType string, audio []byte) (string, error)
}

// openAITranscriber calls an OpenAI-compatible POST {base_url}/audio/transcriptions
// (OpenAI, Groq, a local whisper server...).
type openAITranscriber struct {
	cfg config.TranscriptionConfig
	hc  *http.Client
}

// NewTranscriber returns a Transcriber for cfg, or nil when cfg.BaseURL is
// empty (transcription off). hc may be nil.
func NewTranscriber(cfg config.TranscriptionConfig, hc *http.Client) Transcriber {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil
	}
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	if cfg.Model == "" {
		cfg.Model = "whisper-1"
	}
	return &openAITranscriber{cfg: cfg, hc: hc}
}

func (t *openAITranscriber) Transcribe(ctx context.Context, filename, mimeType string, audio []byte) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if err := w.WriteField("model", t.cfg.Model); err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filename))
	h.Set("Content-Type", mimeType)
	part, err := w.CreatePart(h)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	if _, err := part.Write(audio); err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	url := strings.TrimRight(t.cfg.BaseURL, "/") + "/audio/transcriptions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	if t.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.cfg.APIKey)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("transcribe: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("transcribe: HTTP %d: %.200s", resp.StatusCode, data)
	}
	var out struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("transcribe: undecodable answer: %w", err)
	}
	return strings.TrimSpace(out.Text), nil
}
