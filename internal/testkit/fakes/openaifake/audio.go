package openaifake

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// maxAudioBytes is OpenAI's 25 MB upload limit.
const maxAudioBytes = 25 << 20

// listModels answers GET /v1/models, the cheap call `nanobot doctor` makes.
func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]model, 0, len(s.models))
	for _, id := range s.models {
		data = append(data, model{ID: id, Object: "model", Created: created, OwnedBy: "openai"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

// transcriptionsHandler answers POST /v1/audio/transcriptions (multipart:
// file, model, optional language, prompt, response_format).
func (s *Server) transcriptionsHandler(w http.ResponseWriter, r *http.Request) {
	bad := func(msg, p string) {
		e := apiError{Message: msg, Type: "invalid_request_error"}
		if p != "" {
			e.Param = param(p)
		}
		s.reject(w, r, nil, http.StatusBadRequest, e)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAudioBytes+1<<20)
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.reject(w, r, nil, http.StatusRequestEntityTooLarge, apiError{Message: "Maximum content size limit (26214400) exceeded.", Type: "invalid_request_error"})
			return
		}
		bad("Could not parse multipart form", "")
		return
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	f, hdr, err := r.FormFile("file")
	if err != nil {
		bad("'file' is a required property", "file")
		return
	}
	defer func() { _ = f.Close() }()
	audio, err := io.ReadAll(f)
	if err != nil {
		bad("Could not read the uploaded file", "file")
		return
	}
	req := TranscriptionRequest{
		Model:          r.FormValue("model"),
		Filename:       hdr.Filename,
		Audio:          audio,
		Language:       r.FormValue("language"),
		Prompt:         r.FormValue("prompt"),
		ResponseFormat: r.FormValue("response_format"),
	}
	if req.Model == "" {
		bad("you must provide a model parameter", "model")
		return
	}
	s.mu.Lock()
	s.transcriptions = append(s.transcriptions, req)
	s.mu.Unlock()
	text, err := s.transcribe(req)
	if err != nil {
		bad(err.Error(), "file")
		return
	}
	switch req.ResponseFormat {
	case "", "json":
		// OpenAI reports usage with the text: the audio's length for a
		// model billed by the minute (whisper-1), tokens for the others.
		u := map[string]any{"type": "tokens", "input_tokens": len(req.Audio)/100 + 1, "output_tokens": len(text)/4 + 1,
			"input_token_details": map[string]int{"audio_tokens": len(req.Audio)/100 + 1}}
		if req.Model == "whisper-1" {
			u = map[string]any{"type": "duration", "seconds": float64(len(req.Audio)) / 16000}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"text": text, "usage": u})
	case "verbose_json":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"task": "transcribe", "language": req.Language, "duration": 0, "text": text})
	case "text", "srt", "vtt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, text+"\n")
	default:
		bad("Invalid value: '"+req.ResponseFormat+"'. Supported values are: 'json', 'text', 'srt', 'verbose_json', and 'vtt'.", "response_format")
	}
}
