package web

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
)

const (
	defaultTitle = "New chat"
	maxTitle     = 80
	// maxText caps a message's text field; the agent cuts longer input
	// itself (agents.max_input_chars), this only bounds the request.
	maxText = 1 << 20
	// pingEvery keeps proxies from closing an idle stream.
	pingEvery = 25 * time.Second
)

// idPattern is what a conversation id may be, in at most 32 characters
// (validID). The length is checked apart: {1,32} in the pattern would compile
// into a program many times larger, at start (sizes:
// docs/BENCHMARKS.md#figures-behind-code-choices).
var idPattern = regexp.MustCompile(`^[a-z0-9]+$`)

func validID(s string) bool { return len(s) <= 32 && idPattern.MatchString(s) }

func key(id string) string { return Channel + ":" + id }

// conversation is one chat of the page, listed with its title.
type conversation struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
}

// conversations is the page's list of chats, kept in a small state file
// (the sessions hold the messages; the list survives /new).
type conversations struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	loaded bool
	list   []conversation
}

func newConversations(path string, now func() time.Time) *conversations {
	return &conversations{path: path, now: now}
}

// load reads the file once; mu is held.
func (c *conversations) load() error {
	if c.loaded {
		return nil
	}
	var list []conversation
	if _, err := channels.ReadStateFile(c.path, &list); err != nil {
		return fmt.Errorf("web conversations: %w", err)
	}
	c.list, c.loaded = list, true
	return nil
}

func (c *conversations) save(list []conversation) error {
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("web conversations: %w", err)
	}
	if err := atomicfile.Write(c.path, data, 0o600); err != nil {
		return fmt.Errorf("web conversations: %w", err)
	}
	c.list = list
	return nil
}

func (c *conversations) all() ([]conversation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(); err != nil {
		return nil, err
	}
	return slices.Clone(c.list), nil
}

func (c *conversations) get(id string) (conversation, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, err := c.index(id)
	if err != nil || i < 0 {
		return conversation{}, false, err
	}
	return c.list[i], true, nil
}

// index loads the list and returns the position of conversation id, -1
// when there is none; mu is held.
func (c *conversations) index(id string) (int, error) {
	if err := c.load(); err != nil {
		return -1, err
	}
	return slices.IndexFunc(c.list, func(v conversation) bool { return v.ID == id }), nil
}

func (c *conversations) create(title string) (conversation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(); err != nil {
		return conversation{}, err
	}
	v := conversation{ID: newChatID(), Title: title, Created: c.now().UTC()}
	list := append([]conversation{v}, c.list...)
	return v, c.save(list)
}

// update applies fn to conversation id and saves the list when fn reports
// a change; it reports whether the conversation exists.
func (c *conversations) update(id string, fn func(*conversation) bool) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, err := c.index(id)
	if err != nil || i < 0 {
		return false, err
	}
	// fn sees a copy: most calls change nothing (a title is set once), and
	// only a change pays for copying the list.
	v := c.list[i]
	if !fn(&v) {
		return true, nil
	}
	list := slices.Clone(c.list)
	list[i] = v
	return true, c.save(list)
}

func (c *conversations) remove(id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, err := c.index(id)
	if err != nil || i < 0 {
		return false, err
	}
	return true, c.save(slices.Delete(slices.Clone(c.list), i, i+1))
}

func newChatID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// cleanTitle trims a title to one short line.
func cleanTitle(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxTitle {
		s = string([]rune(s)[:maxTitle-1]) + "…"
	}
	return s
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) {
	list, err := s.convs.all()
	if err != nil {
		s.internal(w, "list conversations", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": list})
}

func (s *Server) createChat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title string `json:"title"`
	}
	if r.ContentLength != 0 && !decodeJSON(w, r, &req, 4<<10) {
		return
	}
	title := cleanTitle(req.Title)
	if title == "" {
		title = defaultTitle
	}
	c, err := s.convs.create(title)
	if err != nil {
		s.internal(w, "create conversation", err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// chatID returns the conversation named in the path, answering 404 when
// there is none.
func (s *Server) chatID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validID(id) {
		writeError(w, http.StatusNotFound, "no such conversation")
		return "", false
	}
	_, ok, err := s.convs.get(id)
	if err != nil {
		s.internal(w, "read conversations", err)
		return "", false
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no such conversation")
		return "", false
	}
	return id, true
}

func (s *Server) renameChat(w http.ResponseWriter, r *http.Request) {
	id, ok := s.chatID(w, r)
	if !ok {
		return
	}
	var req struct {
		Title string `json:"title"`
	}
	if !decodeJSON(w, r, &req, 4<<10) {
		return
	}
	title := cleanTitle(req.Title)
	if title == "" {
		writeError(w, http.StatusBadRequest, "title must not be empty")
		return
	}
	if _, err := s.convs.update(id, func(c *conversation) bool { c.Title = title; return true }); err != nil {
		s.internal(w, "rename conversation", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteChat archives the conversation exactly as /new does (what matters
// goes to memory first) and drops it from the list.
func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request) {
	id, ok := s.command(w, r, "/new")
	if !ok {
		return
	}
	if _, err := s.convs.remove(id); err != nil {
		s.internal(w, "delete conversation", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.command(w, r, "/stop"); ok {
		w.WriteHeader(http.StatusAccepted)
	}
}

// command puts a chat command (/new, /stop) for the conversation in the
// path on the bus and returns the conversation; when it cannot, it has
// answered the request.
func (s *Server) command(w http.ResponseWriter, r *http.Request, text string) (id string, ok bool) {
	if id, ok = s.chatID(w, r); !ok {
		return "", false
	}
	if err := s.publish(r, id, text, randomID(), nil); err != nil {
		s.unavailable(w, err)
		return "", false
	}
	return id, true
}

func (s *Server) publish(r *http.Request, id, text, msgID string, media []llm.Part) error {
	return s.deps.Bus.PublishInbound(r.Context(), bus.InboundMessage{
		Channel: Channel, SenderID: "web", SenderName: "web", ChatID: id, MessageID: msgID,
		Content: text, Media: media, Time: s.deps.Clock.Now(),
	})
}

// send takes a message (JSON {id, text}, or multipart with text, id and
// files) and puts it on the bus. The client's id makes a retried send
// harmless: the agent recognises the message in the session.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	id, ok := s.chatID(w, r)
	if !ok {
		return
	}
	var msgID, text string
	var media []llm.Part
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		var ok bool
		if msgID, text, media, ok = s.readUpload(w, r); !ok {
			return
		}
	} else {
		var req struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		}
		if !decodeJSON(w, r, &req, maxText) {
			return
		}
		msgID, text = req.ID, req.Text
	}
	if strings.TrimSpace(text) == "" && len(media) == 0 {
		writeError(w, http.StatusBadRequest, "empty message: write something or attach a file")
		return
	}
	if msgID == "" || len(msgID) > 64 {
		msgID = randomID()
	}
	if err := s.publish(r, id, text, msgID, media); err != nil {
		s.unavailable(w, err)
		return
	}
	if first := cleanTitle(text); first != "" && !strings.HasPrefix(first, "/") {
		if _, err := s.convs.update(id, func(c *conversation) bool {
			if c.Title != defaultTitle {
				return false
			}
			c.Title = first
			return true
		}); err != nil {
			s.log.Warn("title conversation", zap.String("chat", id), zap.Error(err))
		}
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": msgID})
}

// readUpload parses a multipart message: pictures become image parts for
// the model, other files are saved under inbox/ as file references. The
// whole body is capped at max_upload_bytes (413 past it).
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (msgID, text string, media []llm.Part, ok bool) {
	limit := s.cfg.MaxUploadBytes
	r.Body = http.MaxBytesReader(w, r.Body, limit+maxText)
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
				"upload too large: at most %s per message (channels.web.max_upload_bytes)", bytesize.Format(limit)))
			return "", "", nil, false
		}
		writeError(w, http.StatusBadRequest, "malformed upload: "+err.Error())
		return "", "", nil, false
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	msgID, text = r.FormValue("id"), r.FormValue("text")
	var total int64
	for _, fh := range r.MultipartForm.File["file"] {
		total += fh.Size
	}
	if total > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"upload too large: at most %s per message (channels.web.max_upload_bytes)", bytesize.Format(limit)))
		return "", "", nil, false
	}
	for _, fh := range r.MultipartForm.File["file"] {
		p, err := s.attach(fh)
		if err != nil {
			s.log.Error("web upload", zap.String("file", fh.Filename), zap.Error(err))
			writeError(w, http.StatusInternalServerError, "the file "+inbox.SafeName(fh.Filename)+" could not be saved; see the daemon log")
			return "", "", nil, false
		}
		media = append(media, p)
	}
	return msgID, text, media, true
}

func (s *Server) attach(fh *multipart.FileHeader) (llm.Part, error) {
	f, err := fh.Open()
	if err != nil {
		return llm.Part{}, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return llm.Part{}, err
	}
	mt := http.DetectContentType(data)
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: mt, Data: data}}, nil
	}
	name := inbox.SafeName(fh.Filename)
	rel, err := inbox.Save(s.deps.Workspace, "web-"+newChatID()+"-"+name, data)
	if err != nil {
		return llm.Part{}, err
	}
	return llm.Part{Kind: llm.PartFileRef, File: &llm.FileRef{Path: rel, MIME: mt, Size: int64(len(data)), Name: fh.Filename}}, nil
}

// events streams a conversation: a hello with the stored conversation and
// the turn in flight, then every event until the page goes away.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id, ok := s.chatID(w, r)
	if !ok {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	sub, hello, err := s.hub.subscribe(id)
	if errors.Is(err, errClosed) {
		writeError(w, http.StatusServiceUnavailable, "the gateway is shutting down")
		return
	}
	if err != nil {
		s.internal(w, "read conversation", err)
		return
	}
	defer s.hub.unsubscribe(id, sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// retry tells EventSource how soon to reconnect after a drop.
	if _, err := w.Write(append([]byte("retry: 1000\n"), hello...)); err != nil {
		return
	}
	fl.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case frame, ok := <-sub.ch:
			if !ok {
				return
			}
			// A page that fell behind has more frames queued: write them
			// all, in order, and flush once, rather than a system call and
			// a wake-up for each.
			alive := writeQueued(w, frame, sub.ch)
			fl.Flush()
			if !alive {
				return
			}
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// writeQueued writes frame, then whatever further frames ch already holds
// (without waiting for more); it reports false when the page is gone: a
// write failed or ch was closed (the hub cut the page off). The frames stay
// in the response writer's buffer until the caller flushes.
func writeQueued(w io.Writer, frame []byte, ch <-chan []byte) bool {
	for {
		if _, err := w.Write(frame); err != nil {
			return false
		}
		select {
		case next, ok := <-ch:
			if !ok {
				return false
			}
			frame = next
		default:
			return true
		}
	}
}

func (s *Server) internal(w http.ResponseWriter, op string, err error) {
	s.log.Error("web: "+op, zap.Error(err))
	writeError(w, http.StatusInternalServerError, op+" failed; see the daemon log")
}

func (s *Server) unavailable(w http.ResponseWriter, err error) {
	s.log.Warn("web: message not taken", zap.Error(err))
	writeError(w, http.StatusServiceUnavailable, "the gateway is not taking messages right now (shutting down?); try again")
}
