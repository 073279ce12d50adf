package channels

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
)

func TestTranscriber(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
			return
		}
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f, hdr, err := r.FormFile("file")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		audio, _ := io.ReadAll(f)
		if r.FormValue("model") != "whisper-large" || hdr.Filename != "voice.ogg" || hdr.Header.Get("Content-Type") != "audio/ogg" || string(audio) != "OggS" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"text": " water the plants \n"})
	}))
	defer srv.Close()
	if NewTranscriber(config.TranscriptionConfig{}, nil) != nil {
		t.Error("transcriber built without a base_url")
	}
	tr := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL + "/v1/", APIKey: "sk-test", Model: "whisper-large"}, srv.Client())
	got, err := tr.Transcribe(context.Background(), "voice.ogg", "audio/ogg", []byte("OggS"))
	if err != nil || got != "water the plants" {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	bad := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-wrong"}, srv.Client())
	_, err = bad.Transcribe(context.Background(), "voice.ogg", "audio/ogg", []byte("OggS"))
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("wrong key: %v, want the HTTP status and no key", err)
	}
}
