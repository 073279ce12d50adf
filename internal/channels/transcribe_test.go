package channels

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/usage"
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
	if NewTranscriber(config.TranscriptionConfig{}, nil, nil) != nil {
		t.Error("transcriber built without a base_url")
	}
	tr := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL + "/v1/", APIKey: "sk-test", Model: "whisper-large"}, srv.Client(), nil)
	got, err := tr.Transcribe(context.Background(), "voice.ogg", "audio/ogg", []byte("OggS"))
	if err != nil || got != "water the plants" {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	bad := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-wrong"}, srv.Client(), nil)
	_, err = bad.Transcribe(context.Background(), "voice.ogg", "audio/ogg", []byte("OggS"))
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("wrong key: %v, want the HTTP status and no key", err)
	}
}

// TestTranscriberRecordsUsage: a transcription is a model call: admitted
// by the budget, recorded in the usage ledger with origin transcription
// and the usage the server reported (seconds of audio for whisper-1,
// tokens for the others).
func TestTranscriberRecordsUsage(t *testing.T) {
	srv := openaifake.New(t, nil)
	ledger, err := usage.Open(t.TempDir(), usage.Options{Prices: usage.NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ledger.Close() }()
	budget, _ := usage.NewBudget(usage.Policy{Origins: map[usage.Origin]usage.Limits{usage.OriginTranscription: {Daily: 0.01}}}, ledger, usage.BudgetOptions{})
	meter := testMeter{ledger, budget}
	audio := make([]byte, 16000*60) // a minute, as the fake counts it
	ctx := usage.WithCall(context.Background(), usage.Call{Chat: "telegram:1"})
	for _, model := range []string{"whisper-1", "gpt-4o-mini-transcribe"} {
		tr := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL(), APIKey: srv.APIKey(), Model: model}, nil, meter)
		if _, err := tr.Transcribe(ctx, "voice.ogg", "audio/ogg", audio); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	rep, _ := ledger.Query(usage.Query{Period: usage.Today(ledger.Now(), ledger.Location()), By: usage.ByModel})
	got := map[string]usage.Group{}
	for _, g := range rep.Groups {
		got[g.Key] = g
	}
	if w := got["transcription/whisper-1"]; w.Calls != 1 || w.Cost.String() != "$0.0060" {
		t.Errorf("whisper-1: %+v, want one call at $0.006 a minute", w)
	}
	if g := got["transcription/gpt-4o-mini-transcribe"]; g.Calls != 1 || g.Input == 0 || g.Output == 0 || !g.Cost.Known() {
		t.Errorf("gpt-4o-mini-transcribe: %+v, want its tokens, priced", g)
	}
	origins, _ := ledger.Query(usage.Query{Period: usage.Today(ledger.Now(), ledger.Location()), By: usage.ByOrigin, Chat: "telegram:1"})
	if len(origins.Groups) != 1 || origins.Groups[0].Key != "transcription" {
		t.Errorf("origins %+v", origins.Groups)
	}
	// The transcription budget of $0.01 is spent: the next one is refused
	// without a call.
	before := len(srv.Transcriptions())
	tr := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL(), APIKey: srv.APIKey(), Model: "whisper-1"}, nil, meter)
	if _, err := tr.Transcribe(ctx, "voice.ogg", "audio/ogg", audio); llm.Classify(err).Kind != llm.KindBudget {
		t.Errorf("past the budget: %v", err)
	}
	if len(srv.Transcriptions()) != before {
		t.Error("a transcription was sent past its budget")
	}
}

type testMeter struct {
	*usage.Ledger
	budget *usage.Budget
}

func (m testMeter) Admit(ctx context.Context) (context.Context, usage.Decision) {
	return m.budget.Admit(ctx)
}

// TestTranscriptionHeldToChatLimit: the intake carries the chat into what
// Prepare calls, so a voice message is recorded under its chat and stopped
// by that chat's own limit, while another chat's goes through.
func TestTranscriptionHeldToChatLimit(t *testing.T) {
	srv := openaifake.New(t, nil)
	ledger, err := usage.Open(t.TempDir(), usage.Options{Prices: usage.NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ledger.Close() }()
	budget, err := usage.NewBudget(usage.Policy{Chats: map[string]usage.Limits{"test:7": {Daily: 0.001}}}, ledger, usage.BudgetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTranscriber(config.TranscriptionConfig{BaseURL: srv.URL(), APIKey: srv.APIKey(), Model: "whisper-1"}, nil, testMeter{ledger, budget})
	audio := make([]byte, 16000*60) // a minute at $0.006: past test:7's $0.001 once spent
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{})
	voice := func(chat, id string) error {
		var terr error
		m, _ := msg("1", id, "")
		m.ChatID = chat
		prep := func(ctx context.Context, m *bus.InboundMessage) error {
			text, err := tr.Transcribe(ctx, "voice.ogg", "audio/ogg", audio)
			terr = err
			m.Content = text
			return err
		}
		if _, err := in.Admit(context.Background(), Arrival{Msg: m, Prepare: prep}); err != nil {
			t.Fatal(err)
		}
		return terr
	}
	if err := voice("7", "1"); err != nil {
		t.Fatalf("first voice message of test:7: %v", err)
	}
	before := len(srv.Transcriptions())
	if err := voice("7", "2"); llm.Classify(err).Kind != llm.KindBudget {
		t.Errorf("test:7 past its limit: %v, want a budget stop", err)
	}
	if len(srv.Transcriptions()) != before {
		t.Error("a transcription was sent past the chat's limit")
	}
	if err := voice("8", "3"); err != nil {
		t.Errorf("test:8 has no limit: %v", err)
	}
	rep, _ := ledger.Query(usage.Query{Period: usage.Today(ledger.Now(), ledger.Location()), By: usage.ByChat})
	got := map[string]int64{}
	for _, g := range rep.Groups {
		got[g.Key] = g.Calls
	}
	if got["test:7"] != 1 || got["test:8"] != 1 {
		t.Errorf("calls by chat %v, want one each for test:7 and test:8", got)
	}
	if len(b.in) != 2 {
		t.Errorf("published %d messages, want the two transcribed", len(b.in))
	}
}
