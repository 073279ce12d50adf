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
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// Transcriber turns a voice message into text.
type Transcriber interface {
	Transcribe(ctx context.Context, filename, mimeType string, audio []byte) (string, error)
}

// Meter is where transcriptions are counted and admitted: the usage ledger
// and the budget (internal/usage), as the daemon wires them. A
// transcription is a model call like any other (origin transcription).
type Meter interface {
	usage.Recorder
	Admit(ctx context.Context) (context.Context, usage.Decision)
}

// openAITranscriber calls an OpenAI-compatible POST {base_url}/audio/transcriptions
// (OpenAI, Groq, a local whisper server...).
type openAITranscriber struct {
	cfg   config.TranscriptionConfig
	hc    *http.Client
	meter Meter
}

// TranscriptionProvider is the provider name transcriptions are recorded
// under in the usage ledger ("transcription/whisper-1"); prices: entries
// for it price them.
const TranscriptionProvider = "transcription"

// NewTranscriber returns a Transcriber for cfg, or nil when cfg.BaseURL is
// empty (transcription off). hc and meter may be nil.
func NewTranscriber(cfg config.TranscriptionConfig, hc *http.Client, meter Meter) Transcriber {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil
	}
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	if cfg.Model == "" {
		cfg.Model = "whisper-1"
	}
	return &openAITranscriber{cfg: cfg, hc: hc, meter: meter}
}

// Transcribe sends the audio, admitted by the budget first and recorded in
// the usage ledger after (the server's usage: tokens, or seconds of audio
// for a model billed by the minute).
func (t *openAITranscriber) Transcribe(ctx context.Context, filename, mimeType string, audio []byte) (string, error) {
	if t.meter == nil {
		text, _, err := t.transcribe(ctx, filename, mimeType, audio)
		return text, err
	}
	c, _ := usage.CallFrom(ctx)
	c.Origin = usage.OriginTranscription
	ctx, d := t.meter.Admit(usage.WithCall(ctx, c))
	if err := d.Err(); err != nil {
		return "", err
	}
	start := time.Now()
	text, rec, err := t.transcribe(ctx, filename, mimeType, audio)
	rec.Time, rec.Origin, rec.Session, rec.Chat = start, usage.OriginTranscription, c.Session, c.Chat
	rec.Route, rec.Provider, rec.Model = TranscriptionProvider+"/"+t.cfg.Model, TranscriptionProvider, t.cfg.Model
	rec.Outcome = usage.OutcomeOK
	if err != nil {
		rec.Outcome = usage.OutcomeFailed
	}
	if rerr := t.meter.Record(ctx, rec); rerr != nil && err == nil {
		// The text matters more than its bookkeeping.
		return text, nil
	}
	return text, err
}

// transcribeUsage is the usage OpenAI reports with a transcription: tokens
// (gpt-4o-transcribe) or the audio's length (whisper-1).
type transcribeUsage struct {
	Type         string  `json:"type"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Seconds      float64 `json:"seconds"`
}

func (t *openAITranscriber) transcribe(ctx context.Context, filename, mimeType string, audio []byte) (string, usage.Record, error) {
	var rec usage.Record
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if err := w.WriteField("model", t.cfg.Model); err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filename))
	h.Set("Content-Type", mimeType)
	part, err := w.CreatePart(h)
	if err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	if _, err := part.Write(audio); err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	url := strings.TrimRight(t.cfg.BaseURL, "/") + "/audio/transcriptions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	if t.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.cfg.APIKey)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return "", rec, fmt.Errorf("transcribe: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", rec, fmt.Errorf("transcribe: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", rec, fmt.Errorf("transcribe: HTTP %d: %.200s", resp.StatusCode, data)
	}
	var out struct {
		Text  string           `json:"text"`
		Usage *transcribeUsage `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", rec, fmt.Errorf("transcribe: undecodable answer: %w", err)
	}
	text := strings.TrimSpace(out.Text)
	switch u := out.Usage; {
	case u == nil:
		// No usage (a local whisper server): the text, estimated.
		rec.Tokens.OutputTokens, rec.Estimated = usage.Estimate(llm.Request{}, llm.NewText(llm.RoleAssistant, text)).OutputTokens, true
	case u.Type == "duration":
		rec.AudioSeconds = u.Seconds
	default:
		rec.Tokens.InputTokens, rec.Tokens.OutputTokens = u.InputTokens, u.OutputTokens
	}
	return text, rec, nil
}
