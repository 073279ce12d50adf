// Package telegramfake is a fake Telegram Bot API server for tests. It speaks
// the real wire protocol over HTTP (JSON, form and multipart requests, the
// {"ok":...} envelope, error codes and descriptions), long-polls getUpdates
// honouring offset and timeout, validates parse_mode HTML like Telegram and
// serves files. Tests push updates, inject faults (429 with retry_after, 400
// can't parse entities, 409, 5xx, stalls) and read what the bot sent.
//
// Test code only.
package telegramfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
)

// Token is the bot token the fake accepts unless told otherwise.
const Token = "123456:TEST-token"

// Username is the fake bot's username.
const Username = "nanobot_test_bot"

// Call is one request the bot made.
type Call struct {
	Method string
	Params map[string]string
	Files  map[string][]byte
	// Status is the HTTP status answered (200, or the injected/validation error).
	Status int
	// Error is the description of a failed call.
	Error string
	At    time.Time
}

// Message is a message the bot sent, as it currently stands.
type Message struct {
	ID        int
	ChatID    int64
	ThreadID  int
	Text      string // as sent (HTML when ParseMode is HTML)
	Visible   string // what the user sees: markup parsed
	ParseMode string
	ReplyTo   int
	Photo     []byte
	Document  []byte
	FileName  string
	Caption   string
	Edits     int
	Deleted   bool
}

// FaultKind is an injectable failure.
type FaultKind int

const (
	// RateLimit answers 429 with parameters.retry_after.
	RateLimit FaultKind = iota
	// BadEntities answers 400 "can't parse entities".
	BadEntities
	// Conflict answers 409 as when another poller is running.
	Conflict
	// ServerError answers 502.
	ServerError
	// Stall never answers, until the client gives up or the server closes.
	Stall
)

// Fault is a failure injected into the next Times calls of a method.
type Fault struct {
	Kind       FaultKind
	RetryAfter int // seconds, for RateLimit
	Times      int // how many calls it affects [1]
}

// Server is the fake. Create it with New.
type Server struct {
	t   fakes.TB
	srv *httptest.Server
	Bot models.User

	mu        sync.Mutex
	token     string // the one token accepted (SetToken)
	updates   []models.Update
	nextUpd   int64
	confirmed int64 // every update with a lower id is gone
	msgs      map[int64][]*Message
	nextMsg   int
	calls     []Call
	faults    map[string][]*Fault
	files     map[string]fileEntry
	webhook   string
	secret    string
	commands  []models.BotCommand
	longPolls int           // getUpdates calls with a timeout, not answered yet
	changed   chan struct{} // closed and replaced on every change
	closed    chan struct{}
	// stream, when set, receives every call instead of calls (see Stream).
	stream func(Call)
}

type fileEntry struct {
	path string
	data []byte
}

// SetToken makes the fake accept tok, and refuse every other token (401),
// from the next call on: a token revoked or reissued at @BotFather.
func (s *Server) SetToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

func (s *Server) acceptedToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// New starts a fake server; it is closed by t.Cleanup.
func New(t fakes.TB) *Server {
	s := &Server{
		t:       t,
		token:   Token,
		Bot:     models.User{ID: 123456, IsBot: true, FirstName: "Nanobot", Username: Username, CanJoinGroups: true},
		nextUpd: 1000,
		msgs:    map[int64][]*Message{},
		nextMsg: 1,
		faults:  map[string][]*Fault{},
		files:   map[string]fileEntry{},
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL is the server's base URL (the bot's api_url).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server, releasing stalled requests first.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// PushUpdate queues an update for getUpdates, assigning its update_id when
// zero, and returns the id.
func (s *Server) PushUpdate(u models.Update) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.ID == 0 {
		u.ID = s.nextUpd
	}
	s.nextUpd = max(s.nextUpd, u.ID+1)
	s.updates = append(s.updates, u)
	s.notifyLocked()
	return u.ID
}

// PushMessage queues a message update; Date and MessageID are filled in when
// zero.
func (s *Server) PushMessage(m models.Message) int64 {
	if m.Date == 0 {
		m.Date = int(time.Now().Unix())
	}
	s.mu.Lock()
	if m.ID == 0 {
		m.ID = s.nextMsg
		s.nextMsg++
	}
	s.mu.Unlock()
	return s.PushUpdate(models.Update{Message: &m})
}

// PushEdit queues an edited_message update: m is the new version of a
// message pushed earlier (same ID), its EditDate set to now when zero.
func (s *Server) PushEdit(m models.Message) int64 {
	if m.Date == 0 {
		m.Date = int(time.Now().Unix())
	}
	if m.EditDate == 0 {
		m.EditDate = int(time.Now().Unix())
	}
	return s.PushUpdate(models.Update{EditedMessage: &m})
}

// AddFile stores a downloadable file and returns its file_id.
func (s *Server) AddFile(path string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("file-%d", len(s.files)+1)
	s.files[id] = fileEntry{path: path, data: data}
	return id
}

// Inject makes the next f.Times calls of method fail with f.Kind.
func (s *Server) Inject(method string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], &f)
}

// Stream hands every later call to f, as it is answered, instead of keeping
// it: Calls no longer lists them. It is for long runs (bench/cmd/nanobot-bench)
// that would otherwise hold every call in memory. f runs on the request's
// goroutine, so it must be quick and safe for concurrent use.
func (s *Server) Stream(f func(Call)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream = f
}

// Calls returns every request so far, optionally only those of methods.
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Forget drops the call log and the messages sent so far (updates and
// files stay), so a long run measuring the memory of the code under test
// does not count the fake's records.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
	s.msgs = map[int64][]*Message{}
	s.notifyLocked()
}

// Sent returns the messages the bot sent to chat, in order, deleted ones
// included (marked).
func (s *Server) Sent(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[chat] {
		out = append(out, *m)
	}
	return out
}

// Visible returns what the user sees in chat: the text of every message not
// deleted, in order.
func (s *Server) Visible(chat int64) []string {
	var out []string
	for _, m := range s.Sent(chat) {
		if !m.Deleted {
			out = append(out, m.Visible)
		}
	}
	return out
}

// Confirmed returns the offset the bot confirmed: every update with a lower
// id has been acknowledged to Telegram.
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// LongPolls returns how many getUpdates calls with a timeout are waiting
// for an answer right now. On a quiet bot a long poll only returns at its
// timeout, so a test can tell "polling" from "a poll has returned".
func (s *Server) LongPolls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.longPolls
}

// Webhook returns the webhook URL and secret set by the bot.
func (s *Server) Webhook() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook, s.secret
}

// Commands returns the commands set with setMyCommands.
func (s *Server) Commands() []models.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]models.BotCommand(nil), s.commands...)
}

// Wait waits until cond holds, re-checking on every change, and fails the
// test after 10 s.
func (s *Server) Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("telegramfake: timed out waiting for %s; calls: %s", what, s.summary())
		}
	}
}

// WaitCalls waits until method was called at least n times and returns those calls.
func (s *Server) WaitCalls(t testing.TB, method string, n int) []Call {
	t.Helper()
	s.Wait(t, fmt.Sprintf("%d %s calls", n, method), func() bool { return len(s.Calls(method)) >= n })
	return s.Calls(method)
}

func (s *Server) summary() string {
	var b strings.Builder
	for _, c := range s.Calls() {
		fmt.Fprintf(&b, "\n  %s %d %s %q", c.Method, c.Status, c.Error, c.Params["text"])
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- wire protocol ---

type envelope struct {
	OK          bool   `json:"ok"`
	Result      any    `json:"result,omitempty"`
	ErrorCode   int    `json:"error_code,omitempty"`
	Description string `json:"description,omitempty"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after,omitempty"`
	} `json:"parameters,omitempty"`
}

// apiError is a refusal with Telegram's code and description.
type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{code: 400, desc: "Bad Request: " + fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		s.serveFile(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeJSON(w, 404, envelope{ErrorCode: 404, Description: "Not Found"})
		return
	}
	call := Call{Method: method, At: time.Now()}
	params, files, err := parseParams(r)
	call.Params, call.Files = params, files
	if err != nil {
		s.finish(w, call, nil, badRequest("%v", err))
		return
	}
	if token != s.acceptedToken() {
		s.finish(w, call, nil, &apiError{code: 401, desc: "Unauthorized"})
		return
	}
	if f := s.takeFault(method); f != nil {
		if f.Kind == Stall {
			s.record(call, 0, "stalled")
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
			return
		}
		s.finish(w, call, nil, faultError(f))
		return
	}
	var res any
	var aerr *apiError
	switch method {
	case "getMe":
		res = s.Bot
	case "getUpdates":
		res, aerr = s.getUpdates(r.Context(), params)
	case "sendMessage":
		res, aerr = s.sendMessage(params)
	case "editMessageText":
		res, aerr = s.editMessageText(params)
	case "deleteMessage":
		res, aerr = s.deleteMessage(params)
	case "sendChatAction":
		res, aerr = s.chatID(params)
		if aerr == nil {
			res = true
		}
	case "setMyCommands":
		res, aerr = s.setMyCommands(params)
	case "getFile":
		res, aerr = s.getFile(params)
	case "sendPhoto", "sendDocument":
		res, aerr = s.sendMedia(method, params, files)
	case "setWebhook":
		s.mu.Lock()
		s.webhook, s.secret = params["url"], params["secret_token"]
		s.mu.Unlock()
		res = true
	case "deleteWebhook":
		s.mu.Lock()
		s.webhook, s.secret = "", ""
		s.mu.Unlock()
		res = true
	default:
		aerr = &apiError{code: 404, desc: "Not Found: method not found"}
	}
	s.finish(w, call, res, aerr)
}

func faultError(f *Fault) *apiError {
	switch f.Kind {
	case RateLimit:
		return &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", f.RetryAfter), retryAfter: f.RetryAfter}
	case BadEntities:
		return badRequest("can't parse entities: Unsupported start tag \"x\" at byte offset 0")
	case Conflict:
		return &apiError{code: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	default:
		return &apiError{code: 502, desc: "Bad Gateway"}
	}
}

func (s *Server) takeFault(method string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.faults[method]
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	f.Times--
	if f.Times <= 0 {
		s.faults[method] = fs[1:]
	}
	return f
}

func (s *Server) finish(w http.ResponseWriter, call Call, res any, aerr *apiError) {
	if aerr != nil {
		env := envelope{ErrorCode: aerr.code, Description: aerr.desc}
		if aerr.retryAfter > 0 {
			env.Parameters = &struct {
				RetryAfter int `json:"retry_after,omitempty"`
			}{aerr.retryAfter}
		}
		s.record(call, aerr.code, aerr.desc)
		writeJSON(w, aerr.code, env)
		return
	}
	s.record(call, 200, "")
	writeJSON(w, 200, envelope{OK: true, Result: res})
}

func (s *Server) record(c Call, status int, desc string) {
	c.Status, c.Error = status, desc
	s.mu.Lock()
	stream := s.stream
	if stream == nil {
		s.calls = append(s.calls, c)
	}
	s.notifyLocked()
	s.mu.Unlock()
	if stream != nil {
		stream(c)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// parseParams reads JSON, urlencoded or multipart parameters. JSON values
// that are not strings are kept as their JSON text, as Telegram accepts in
// form fields.
func parseParams(r *http.Request) (map[string]string, map[string][]byte, error) {
	params := map[string]string{}
	files := map[string][]byte{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	ct, ctParams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil && err != io.EOF {
			return params, files, fmt.Errorf("invalid JSON: %v", err)
		}
		for k, v := range raw {
			var str string
			if json.Unmarshal(v, &str) == nil {
				params[k] = str
			} else {
				params[k] = string(v)
			}
		}
	case "multipart/form-data":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return params, files, err
		}
		if len(bytes.TrimSpace(body)) == 0 {
			break // a method without parameters (the library sends no parts)
		}
		mr := multipart.NewReader(bytes.NewReader(body), ctParams["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return params, files, fmt.Errorf("invalid multipart body: %v", err)
			}
			data, err := io.ReadAll(p)
			if err != nil {
				return params, files, err
			}
			if p.FileName() != "" {
				files[p.FormName()] = data
				params[p.FormName()+"#filename"] = p.FileName()
			} else {
				params[p.FormName()] = string(data)
			}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return params, files, err
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	}
	return params, files, nil
}

func (s *Server) getUpdates(ctx context.Context, p map[string]string) (any, *apiError) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	limit, _ := strconv.Atoi(p["limit"])
	// Like Telegram, send only the kinds of update asked for; an absent
	// list means every kind but a few the fake never makes.
	var allowed []string
	if raw := p["allowed_updates"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &allowed); err != nil {
			return nil, badRequest("can't parse allowed_updates: %v", err)
		}
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	deadline := time.After(time.Duration(timeout) * time.Second)
	if timeout > 0 {
		s.mu.Lock()
		s.longPolls++
		s.notifyLocked()
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.longPolls--
			s.notifyLocked()
			s.mu.Unlock()
		}()
	}
	for {
		s.mu.Lock()
		if s.webhook != "" {
			s.mu.Unlock()
			return nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
		}
		if offset > s.confirmed {
			s.confirmed = offset
			kept := s.updates[:0]
			for _, u := range s.updates {
				if u.ID >= offset {
					kept = append(kept, u)
				}
			}
			s.updates = kept
		}
		var out []models.Update
		for _, u := range s.updates {
			if u.ID >= offset && len(out) < limit && (len(allowed) == 0 || slices.Contains(allowed, updateKind(u))) {
				out = append(out, u)
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			if out == nil {
				out = []models.Update{}
			}
			return out, nil
		}
		select {
		case <-ch:
		case <-deadline:
			return []models.Update{}, nil
		case <-ctx.Done():
			return []models.Update{}, nil
		case <-s.closed:
			return []models.Update{}, nil
		}
	}
}

// updateKind is the allowed_updates name of u's kind.
func updateKind(u models.Update) string {
	switch {
	case u.Message != nil:
		return models.AllowedUpdateMessage
	case u.EditedMessage != nil:
		return models.AllowedUpdateEditedMessage
	case u.CallbackQuery != nil:
		return models.AllowedUpdateCallbackQuery
	}
	return "other"
}

func (s *Server) chatID(p map[string]string) (int64, *apiError) {
	id, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return 0, badRequest("chat not found")
	}
	return id, nil
}

// checkText validates a message text like Telegram and returns what the user sees.
func checkText(text, parseMode string, limit int) (string, *apiError) {
	visible := text
	if strings.EqualFold(parseMode, "HTML") {
		v, err := ParseHTML(text)
		if err != nil {
			return "", badRequest("can't parse entities: %v", err)
		}
		visible = v
	} else if parseMode != "" {
		return "", badRequest("unsupported parse_mode %q in this fake", parseMode)
	}
	if strings.TrimSpace(visible) == "" {
		return "", badRequest("message text is empty")
	}
	if n := len(utf16.Encode([]rune(visible))); n > limit {
		return "", badRequest("message is too long")
	}
	return visible, nil
}

func (s *Server) sendMessage(p map[string]string) (any, *apiError) {
	chat, aerr := s.chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	visible, aerr := checkText(p["text"], p["parse_mode"], 4096)
	if aerr != nil {
		return nil, aerr
	}
	m := &Message{ChatID: chat, Text: p["text"], Visible: visible, ParseMode: p["parse_mode"]}
	m.ThreadID, _ = strconv.Atoi(p["message_thread_id"])
	if rp := p["reply_parameters"]; rp != "" {
		var r models.ReplyParameters
		if err := json.Unmarshal([]byte(rp), &r); err != nil {
			return nil, badRequest("can't parse reply parameters JSON object")
		}
		m.ReplyTo = r.MessageID
	}
	return s.store(m), nil
}

func (s *Server) store(m *Message) models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.ID = s.nextMsg
	s.nextMsg++
	s.msgs[m.ChatID] = append(s.msgs[m.ChatID], m)
	return s.wireLocked(m)
}

func (s *Server) wireLocked(m *Message) models.Message {
	return models.Message{ID: m.ID, MessageThreadID: m.ThreadID, Date: int(time.Now().Unix()),
		Chat: models.Chat{ID: m.ChatID, Type: chatType(m.ChatID)}, From: &s.Bot, Text: m.Visible, Caption: m.Caption}
}

func chatType(id int64) models.ChatType {
	if id < 0 {
		return models.ChatTypeSupergroup
	}
	return models.ChatTypePrivate
}

func (s *Server) find(p map[string]string) (*Message, *apiError) {
	chat, aerr := s.chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := strconv.Atoi(p["message_id"])
	for _, m := range s.msgs[chat] {
		if m.ID == id && !m.Deleted {
			return m, nil
		}
	}
	return nil, nil
}

func (s *Server) editMessageText(p map[string]string) (any, *apiError) {
	visible, aerr := checkText(p["text"], p["parse_mode"], 4096)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.find(p)
	if aerr != nil {
		return nil, aerr
	}
	if m == nil {
		return nil, badRequest("message to edit not found")
	}
	if m.Text == p["text"] && m.ParseMode == p["parse_mode"] {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	m.Text, m.Visible, m.ParseMode = p["text"], visible, p["parse_mode"]
	m.Edits++
	return s.wireLocked(m), nil
}

func (s *Server) deleteMessage(p map[string]string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.find(p)
	if aerr != nil {
		return nil, aerr
	}
	if m == nil {
		return nil, badRequest("message to delete not found")
	}
	m.Deleted = true
	return true, nil
}

func (s *Server) setMyCommands(p map[string]string) (any, *apiError) {
	var cmds []models.BotCommand
	if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
		return nil, badRequest("can't parse commands JSON object")
	}
	s.mu.Lock()
	s.commands = cmds
	s.mu.Unlock()
	return true, nil
}

func (s *Server) getFile(p map[string]string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[p["file_id"]]
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	return models.File{FileID: p["file_id"], FileUniqueID: p["file_id"], FileSize: int64(len(f.data)), FilePath: f.path}, nil
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, path, _ := strings.Cut(rest, "/")
	if token != s.acceptedToken() {
		http.Error(w, "Unauthorized", 401)
		return
	}
	path, _ = url.PathUnescape(path)
	s.mu.Lock()
	var data []byte
	found := false
	ids := make([]string, 0, len(s.files))
	for id := range s.files {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if s.files[id].path == path {
			data, found = s.files[id].data, true
		}
	}
	s.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

func (s *Server) sendMedia(method string, p map[string]string, files map[string][]byte) (any, *apiError) {
	chat, aerr := s.chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	field := "photo"
	if method == "sendDocument" {
		field = "document"
	}
	data, ok := files[field]
	if !ok {
		return nil, badRequest("there is no %s in the request", field)
	}
	caption := p["caption"]
	if caption != "" {
		v, aerr := checkText(caption, p["parse_mode"], 1024)
		if aerr != nil {
			return nil, aerr
		}
		caption = v
	}
	m := &Message{ChatID: chat, Caption: caption, Visible: caption, FileName: p[field+"#filename"]}
	m.ThreadID, _ = strconv.Atoi(p["message_thread_id"])
	if field == "photo" {
		m.Photo = data
	} else {
		m.Document = data
	}
	return s.store(m), nil
}
