// Package openaifake is a fake OpenAI API server for tests. It speaks the
// real wire protocol over real HTTP (httptest): streaming Chat Completions as
// server-sent events, non-streaming JSON, /v1/models and multipart
// /v1/audio/transcriptions. It is as strict as OpenAI about the things that
// break real requests (bearer key, tool-message pairing, roles, max_tokens on
// reasoning models) and answers with OpenAI's error bodies.
//
// What the model says comes from a fakellm.Script, which also records every
// accepted request. Requests the fake refuses with 400 are not passed to the
// script (no reply is used up); they are listed by Rejected.
//
// Test code only.
package openaifake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// DefaultAPIKey is the bearer key the fake expects unless WithAPIKey says otherwise.
const DefaultAPIKey = "sk-openaifake-test-key"

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	t          fakes.TB
	srv        *httptest.Server
	script     *fakellm.Script
	apiKey     string
	models     []string
	transcribe func(TranscriptionRequest) (string, error)
	// strictArgs refuses tool calls whose arguments are not a JSON object.
	strictArgs bool

	closing   chan struct{} // closed first on Close, so waiting handlers return
	closeOnce sync.Once
	inFlight  atomic.Int64
	seq       atomic.Int64

	mu             sync.Mutex
	rejected       []Rejection
	transcriptions []TranscriptionRequest
}

// Rejection is a request the fake refused before it reached the script.
type Rejection struct {
	Path    string
	Status  int
	Message string
	Raw     []byte
}

// TranscriptionRequest is what /v1/audio/transcriptions received.
type TranscriptionRequest struct {
	Model          string
	Filename       string
	Audio          []byte
	Language       string
	Prompt         string
	ResponseFormat string
}

// Option configures New.
type Option func(*Server)

// WithAPIKey sets the bearer key the fake requires; "" accepts any request,
// like a local Ollama.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithStrictArguments makes the fake parse the arguments of every tool call
// in the history and answer 400 when they are not a JSON object, as vLLM and
// several OpenAI-compatible gateways do (OpenAI itself takes any string).
func WithStrictArguments() Option { return func(s *Server) { s.strictArgs = true } }

// WithModels sets the ids /v1/models lists.
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// WithTranscriber sets how audio becomes text; an error is answered with 400
// as OpenAI does for audio it cannot decode.
func WithTranscriber(f func(TranscriptionRequest) (string, error)) Option {
	return func(s *Server) { s.transcribe = f }
}

// New starts a fake answering from script (a fresh one when nil). It is shut
// down by t.Cleanup.
func New(t fakes.TB, script *fakellm.Script, opts ...Option) *Server {
	t.Helper()
	if script == nil {
		script = &fakellm.Script{}
	}
	s := &Server{
		t:       t,
		script:  script,
		apiKey:  DefaultAPIKey,
		models:  []string{"gpt-4o-mini", "gpt-4o", "o3-mini", "whisper-1"},
		closing: make(chan struct{}),
		transcribe: func(r TranscriptionRequest) (string, error) {
			return fmt.Sprintf("transcript of %s (%d bytes)", r.Filename, len(r.Audio)), nil
		},
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.authed(s.chatCompletions))
	mux.HandleFunc("POST /v1/responses", s.authed(s.responses))
	mux.HandleFunc("GET /v1/models", s.authed(s.listModels))
	mux.HandleFunc("POST /v1/audio/transcriptions", s.authed(s.transcriptionsHandler))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
		}, "")
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// URL is the API base URL, ending in /v1 (what base_url is set to).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Script is the script the fake answers from.
func (s *Server) Script() *fakellm.Script { return s.script }

// APIKey is the bearer key the fake expects ("" when it accepts any).
func (s *Server) APIKey() string { return s.apiKey }

// InFlight is the number of chat requests being answered right now. A test
// polls it to see that a cancelled request really ended on the server.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// Close stops the server; handlers waiting on a delay return at once. It is
// safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Rejected returns the requests the fake refused with a 4xx before they
// reached the script.
func (s *Server) Rejected() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rejection(nil), s.rejected...)
}

// Transcriptions returns every transcription request received.
func (s *Server) Transcriptions() []TranscriptionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TranscriptionRequest(nil), s.transcriptions...)
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, raw []byte, status int, e apiError) {
	s.mu.Lock()
	s.rejected = append(s.rejected, Rejection{Path: r.URL.Path, Status: status, Message: e.Message, Raw: raw})
	s.mu.Unlock()
	s.t.Logf("openaifake: %s %s refused with %d: %s", r.Method, r.URL.Path, status, e.Message)
	writeError(w, status, e, "")
}

// authed checks the bearer key the way OpenAI does before anything else.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.apiKey == "" {
			h(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || got == "":
			s.reject(w, r, nil, http.StatusUnauthorized, apiError{
				Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
				Type:    "invalid_request_error",
			})
		case got != s.apiKey:
			s.reject(w, r, nil, http.StatusUnauthorized, apiError{
				Message: fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", maskKey(got)),
				Type:    "invalid_request_error",
				Code:    "invalid_api_key",
			})
		default:
			h(w, r)
		}
	}
}

// maskKey shows a key the way OpenAI's 401 does: ends kept, middle starred.
func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

// apiError is OpenAI's error object.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

func param(p string) *string { return &p }

// writeError answers with OpenAI's error body and, when set, Retry-After.
func writeError(w http.ResponseWriter, status int, e apiError, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error apiError `json:"error"`
	}{e})
}

// defaultError fills in what OpenAI says for a status when the script gave
// no type or message.
func defaultError(status int, typ, msg string) apiError {
	e := apiError{Type: typ, Message: msg}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if e.Type == "" {
		switch {
		case status == http.StatusTooManyRequests:
			e.Type, e.Code = "requests", "rate_limit_exceeded"
			if msg == "" {
				e.Message = "Rate limit reached for requests. Please try again later."
			}
		case status == http.StatusUnauthorized:
			e.Type, e.Code = "invalid_request_error", "invalid_api_key"
		case status >= 500:
			e.Type = "server_error"
		default:
			e.Type = "invalid_request_error"
		}
	}
	return e
}
