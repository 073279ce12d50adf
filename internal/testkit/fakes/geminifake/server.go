// Package geminifake is a fake Gemini API (generativelanguage v1beta) over
// real HTTP for tests: POST /v1beta/models/{model}:streamGenerateContent
// ?alt=sse answers with real server-sent events (thought summaries, text,
// function calls carrying thought signatures, running usage, a finish
// reason) scripted by a fakellm.Script, and GET /v1beta/models lists models
// for doctor checks.
//
// It is strict the way Gemini is: a request is refused with 403 without an
// x-goog-api-key, with 400 API_KEY_INVALID for a wrong one, and with 400
// INVALID_ARGUMENT for unknown fields, turns that do not alternate between
// user and model, a function call turn that does not follow a user turn, a
// function response turn that does not answer exactly the calls of the
// model turn before it, a function call in the turn being continued whose
// first call lacks its thought signature, or a signature the server did not
// issue (see validate.go). Refused requests consume no scripted reply and
// are listed by Rejected.
//
// Like Gemini, it signs only the first function call of a reply (parallel
// calls after it carry none), and puts the signature of a reply without
// calls on a last part with empty text.
//
// Fault injection comes from fakellm.Reply: Status (with Google's error
// body; RetryAfterMS becomes a google.rpc.RetryInfo retryDelay in it,
// RetryAfter a Retry-After header), Truncate (the stream stops without a
// finish reason), MidStreamError (an error object of that status inside the
// stream), Garbage, Delay and ChunkDelay.
//
// Test code only.
package geminifake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// APIKey is the x-goog-api-key the server accepts unless WithAPIKey says
// otherwise.
const APIKey = "AIzaFakeGeminiKey0123456789"

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the only key the server accepts.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels sets the model ids GET /v1beta/models lists.
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// Rejection is a request the server refused before it reached the script.
type Rejection struct {
	Status  int
	Reason  string // Google status, or ErrorInfo reason
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

	mu         sync.Mutex
	rejected   []Rejection
	signatures map[string]bool
	signed     int
}

// New starts a fake Gemini server answering from script (a new one when nil).
func New(t testing.TB, script *fakellm.Script, opts ...Option) *Server {
	t.Helper()
	if script == nil {
		script = &fakellm.Script{}
	}
	s := &Server{
		t:          t,
		script:     script,
		apiKey:     APIKey,
		models:     []string{"gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview"},
		signatures: map[string]bool{},
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

// Script is the script the server answers from.
func (s *Server) Script() *fakellm.Script { return s.script }

// Client is an HTTP client for the server whose idle connections are closed
// at cleanup, so goroutine-leak checks stay quiet.
func (s *Server) Client() *http.Client {
	c := &http.Client{Transport: &http.Transport{}}
	s.t.Cleanup(c.CloseIdleConnections)
	return c
}

// Rejected returns the requests refused so far, in order.
func (s *Server) Rejected() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rejection(nil), s.rejected...)
}

// ServeHTTP routes the endpoints the adapter and doctor use.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/v1beta/models"
	switch {
	case r.URL.Path == prefix && r.Method == http.MethodGet:
		s.modelsEndpoint(w, r)
	case strings.HasPrefix(r.URL.Path, prefix+"/") && r.Method == http.MethodPost:
		model, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, prefix+"/"), ":")
		if !ok || model == "" || (method != "streamGenerateContent" && method != "generateContent") {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "", fmt.Sprintf("%s %s not found", r.Method, r.URL.Path), nil)
			return
		}
		s.generate(w, r, model, method == "streamGenerateContent")
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "", fmt.Sprintf("%s %s not found", r.Method, r.URL.Path), nil)
	}
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.reject(w, raw, http.StatusBadRequest, "INVALID_ARGUMENT", "could not read body: "+err.Error())
		return
	}
	if !s.authorized(w, r, raw) {
		return
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		s.reject(w, raw, http.StatusBadRequest, "INVALID_ARGUMENT", "geminifake serves streams as server-sent events only (alt=sse)")
		return
	}
	if !stream {
		s.reject(w, raw, http.StatusBadRequest, "INVALID_ARGUMENT", "geminifake serves streamGenerateContent only")
		return
	}
	req, verr := parseRequest(raw)
	if verr == nil {
		req.model, req.stream = model, stream
		verr = s.validate(req)
	}
	if verr != nil {
		s.reject(w, raw, http.StatusBadRequest, "INVALID_ARGUMENT", verr.Error())
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
	s.stream(w, r, req, reply)
}

// authorized checks the key: Gemini answers 403 without one and 400
// API_KEY_INVALID for a wrong one.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	switch key {
	case s.apiKey:
		return true
	case "":
		s.reject(w, raw, http.StatusForbidden, "PERMISSION_DENIED",
			"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
	default:
		s.rejectReason(w, raw, http.StatusBadRequest, "INVALID_ARGUMENT", "API_KEY_INVALID", "API key not valid. Please pass a valid API key.")
	}
	return false
}

func (s *Server) modelsEndpoint(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, nil) {
		return
	}
	type model struct {
		Name        string `json:"name"`
		DisplayName string `json:"displayName"`
	}
	list := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	for _, id := range s.models {
		list.Models = append(list.Models, model{Name: "models/" + id, DisplayName: id})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func (s *Server) reject(w http.ResponseWriter, raw []byte, status int, gstatus, msg string) {
	s.rejectReason(w, raw, status, gstatus, "", msg)
}

func (s *Server) rejectReason(w http.ResponseWriter, raw []byte, status int, gstatus, reason, msg string) {
	r := Rejection{Status: status, Reason: gstatus, Message: msg, Raw: raw}
	if reason != "" {
		r.Reason = reason
	}
	s.mu.Lock()
	s.rejected = append(s.rejected, r)
	s.mu.Unlock()
	s.t.Logf("geminifake: refused request: %d %s: %s", status, r.Reason, msg)
	writeError(w, status, gstatus, reason, msg, nil)
}

// sign returns a new signature (base64, as Gemini's are) or the scripted
// one, and remembers it as issued.
func (s *Server) sign(scripted string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig := scripted
	if sig == "" {
		s.signed++
		sig = base64.StdEncoding.EncodeToString([]byte("geminifake-signature-" + strconv.Itoa(s.signed)))
	}
	s.signatures[sig] = true
	return sig
}

func (s *Server) issued(sig string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signatures[sig]
}

// googleStatus is the canonical status Google sends with each HTTP status.
var googleStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// httpStatus is the reverse of googleStatus, for errors inside a stream.
func httpStatus(gstatus string) int {
	for code, s := range googleStatus {
		if s == gstatus {
			return code
		}
	}
	return 500
}

func writeScriptedError(w http.ResponseWriter, reply fakellm.Reply) {
	gstatus := reply.ErrorType
	if gstatus == "" {
		gstatus = googleStatus[reply.Status]
	}
	if gstatus == "" {
		gstatus = "UNKNOWN"
	}
	msg := reply.ErrorMessage
	if msg == "" {
		msg = http.StatusText(reply.Status)
	}
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	var details []any
	if reply.RetryAfterMS != "" {
		ms, _ := strconv.ParseFloat(reply.RetryAfterMS, 64) // test input
		details = append(details, map[string]string{
			"@type":      "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": strconv.FormatFloat(ms/1000, 'f', -1, 64) + "s",
		})
	}
	writeError(w, reply.Status, gstatus, "", msg, details)
}

// errorBody is Google's error envelope, for HTTP errors and errors inside a
// stream.
func errorBody(code int, gstatus, reason, msg string, details []any) map[string]any {
	if reason != "" {
		details = append(details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com",
		})
	}
	e := map[string]any{"code": code, "message": msg, "status": gstatus}
	if len(details) > 0 {
		e["details"] = details
	}
	return map[string]any{"error": e}
}

func writeError(w http.ResponseWriter, status int, gstatus, reason, msg string, details []any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody(status, gstatus, reason, msg, details))
}
