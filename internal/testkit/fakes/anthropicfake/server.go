// Package anthropicfake is a fake Anthropic Messages API over real HTTP for
// tests: POST /v1/messages answers with real server-sent events (message_start,
// content blocks with thinking, signature, text and tool_use deltas, pings,
// message_delta, message_stop) scripted by a fakellm.Script, and GET /v1/models
// lists models for doctor checks.
//
// It is strict the way Anthropic is: a request is refused with 401 without the
// right x-api-key, with 400 invalid_request_error without a known
// anthropic-version header (both endpoints), and when roles do not
// alternate, the first message is not a user message, tool_result blocks do
// not answer exactly the tool_use blocks of the assistant message before them
// (or are not first in their message), max_tokens is missing, or a thinking
// block lacks its signature (see validate.go for the full list). Refused
// requests consume no scripted reply and are listed by Rejected.
//
// Fault injection comes from fakellm.Reply: Status (with an Anthropic error
// body and retry-after / retry-after-ms headers), Truncate, MidStreamError (an
// `event: error` with that error type), Garbage, Delay and ChunkDelay.
//
// Test code only.
package anthropicfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// APIKey is the x-api-key the server accepts unless WithAPIKey says otherwise.
const APIKey = "sk-ant-fake-key"

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the only x-api-key the server accepts.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels sets the model ids GET /v1/models lists.
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// Rejection is a request the server refused before it reached the script.
type Rejection struct {
	Status  int
	Type    string
	Message string
	Raw     []byte
}

// Server is a running fake. It is closed by the test's cleanup.
type Server struct {
	t      testing.TB
	script *fakellm.Script
	srv    *httptest.Server
	apiKey string
	models []string

	mu       sync.Mutex
	rejected []Rejection
	// signatures maps each thinking signature the server issued to the
	// thinking text it signed, so a replay with altered text is refused.
	signatures map[string]string
	messages   int
}

// New starts a fake Anthropic server answering from script.
func New(t testing.TB, script *fakellm.Script, opts ...Option) *Server {
	t.Helper()
	s := &Server{
		t:          t,
		script:     script,
		apiKey:     APIKey,
		models:     []string{"claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1"},
		signatures: make(map[string]string),
	}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure as providers.<name>.base_url.
func (s *Server) URL() string { return s.srv.URL }

// Client is an HTTP client for the server whose idle connections are closed
// at cleanup, so goroutine-leak checks stay quiet.
func (s *Server) Client() *http.Client {
	c := &http.Client{Transport: &http.Transport{}}
	s.t.Cleanup(c.CloseIdleConnections)
	return c
}

// Rejected returns the requests refused so far (authentication and
// validation failures), in order.
func (s *Server) Rejected() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rejection(nil), s.rejected...)
}

// ServeHTTP routes the two endpoints the adapter and doctor use.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		s.messagesEndpoint(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.modelsEndpoint(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("%s %s not found", r.Method, r.URL.Path))
	}
}

func (s *Server) messagesEndpoint(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.reject(w, raw, http.StatusBadRequest, "invalid_request_error", "could not read body: "+err.Error())
		return
	}
	if !s.authorized(w, r, raw) {
		return
	}
	if !s.versioned(w, r, raw) {
		return
	}
	req, verr := parseRequest(raw)
	if verr == nil {
		verr = s.validate(req)
	}
	if verr != nil {
		s.reject(w, raw, http.StatusBadRequest, "invalid_request_error", verr.Error())
		return
	}
	neutral := req.neutral()
	neutral.Path = r.URL.Path
	neutral.Header = r.Header.Clone()
	neutral.Raw = raw
	reply := s.script.Next(neutral)
	if reply.Delay > 0 && !sleep(r.Context(), reply.Delay) {
		return
	}
	if reply.Status != 0 {
		writeScriptedError(w, reply)
		return
	}
	if !req.Stream {
		s.writeMessage(w, req, reply)
		return
	}
	s.stream(w, r, req, reply)
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	if r.Header.Get("x-api-key") == s.apiKey {
		return true
	}
	s.reject(w, raw, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	return false
}

// apiVersions are the anthropic-version values Anthropic accepts.
var apiVersions = map[string]bool{"2023-06-01": true, "2023-01-01": true}

// versioned refuses a request without a known anthropic-version header, as
// Anthropic does on every endpoint.
func (s *Server) versioned(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	v := r.Header.Get("anthropic-version")
	switch {
	case v == "":
		s.reject(w, raw, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
	case !apiVersions[v]:
		s.reject(w, raw, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("anthropic-version: %q is not a valid version", v))
	default:
		return true
	}
	return false
}

func (s *Server) modelsEndpoint(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, nil) || !s.versioned(w, r, nil) {
		return
	}
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	page := struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Data: []model{}}
	for _, id := range s.models {
		page.Data = append(page.Data, model{Type: "model", ID: id, DisplayName: id, CreatedAt: "2025-01-01T00:00:00Z"})
	}
	if n := len(s.models); n > 0 {
		page.FirstID, page.LastID = &s.models[0], &s.models[n-1]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func (s *Server) reject(w http.ResponseWriter, raw []byte, status int, typ, msg string) {
	s.mu.Lock()
	s.rejected = append(s.rejected, Rejection{Status: status, Type: typ, Message: msg, Raw: raw})
	s.mu.Unlock()
	s.t.Logf("anthropicfake: refused request: %d %s: %s", status, typ, msg)
	writeError(w, status, typ, msg)
}

// sign returns the signature for a thinking text and remembers it.
func (s *Server) sign(text, scripted string) string {
	sig := scripted
	if sig == "" {
		sum := sha256.Sum256([]byte(text))
		sig = "fakesig-" + hex.EncodeToString(sum[:12])
	}
	s.mu.Lock()
	s.signatures[sig] = text
	s.mu.Unlock()
	return sig
}

// signed reports whether sig is unknown to the server or signs text.
func (s *Server) signed(sig, text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, known := s.signatures[sig]
	return !known || want == text
}

func (s *Server) nextMessageID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages++
	return fmt.Sprintf("msg_fake_%04d", s.messages)
}

// errorTypes are the error types Anthropic sends for each status.
var errorTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	403: "permission_error",
	404: "not_found_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	529: "overloaded_error",
}

func writeScriptedError(w http.ResponseWriter, reply fakellm.Reply) {
	typ := reply.ErrorType
	if typ == "" {
		typ = errorTypes[reply.Status]
	}
	if typ == "" {
		typ = "api_error"
	}
	msg := reply.ErrorMessage
	if msg == "" {
		msg = http.StatusText(reply.Status)
		if reply.Status == 529 {
			msg = "Overloaded"
		}
	}
	if reply.RetryAfter != "" {
		w.Header().Set("retry-after", reply.RetryAfter)
	}
	if reply.RetryAfterMS != "" {
		w.Header().Set("retry-after-ms", reply.RetryAfterMS)
	}
	writeError(w, reply.Status, typ, msg)
}

// errorBody is Anthropic's error envelope, used for HTTP errors and for
// `event: error` in a stream.
func errorBody(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody(typ, msg))
}
