package web

import (
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Files the assistant sent to a conversation with its message tool
// (docs/reliability.md#every-turn-ends-with-something-to-read) are shown as
// links (pictures as previews) served behind the login, from the workspace
// only, through os.Root: a path that leaves the workspace, even by a symlink,
// is never opened. A conversation may fetch only the files sent to it: the
// ones the page saw arrive, or the ones its session records as sent by a
// message-tool call that succeeded.

// sentFile is one file of an assistant message as the page shows it. URL is
// empty when the file cannot be served (outside the workspace).
type sentFile struct {
	Name  string `json:"name"`
	URL   string `json:"url,omitempty"`
	Image bool   `json:"image,omitempty"`
}

// maxLiveFiles bounds the files remembered as sent live; past it the
// memory starts over (the session record still vouches for them once the
// turn is stored).
const maxLiveFiles = 4096

// sentFiles knows the workspace and which files went to which conversation.
type sentFiles struct {
	ws string // the workspace, absolute ("" when unknown)

	mu   sync.Mutex
	live map[string]struct{} // id + "\x00" + relative path
}

func newSentFiles(workspace string) *sentFiles {
	ws := ""
	if workspace != "" {
		if abs, err := filepath.Abs(workspace); err == nil {
			ws = abs
		}
	}
	return &sentFiles{ws: ws, live: map[string]struct{}{}}
}

// rel makes p (as the message tool was given it, or as it resolved it) a
// slash-separated path inside the workspace, or reports that it is not one.
// The check is lexical; os.Root enforces it when the file is opened.
func (f *sentFiles) rel(p string) (string, bool) {
	if p == "" || strings.HasPrefix(p, "~") || f.ws == "" {
		return "", false
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(f.ws, p)
		if err != nil {
			return "", false
		}
		p = r
	}
	p = filepath.ToSlash(filepath.Clean(p))
	first, _, _ := strings.Cut(p, "/")
	if p == "." || first == ".." || strings.EqualFold(first, "sessions") || path.IsAbs(p) {
		return "", false
	}
	return p, true
}

// parts turns a message's media into the page's files, remembering the
// servable ones as sent to conversation id.
func (f *sentFiles) parts(id string, media []llm.Part) []sentFile {
	var out []sentFile
	for _, p := range media {
		var where, name string
		image := false
		switch {
		case p.File != nil:
			where, name = p.File.Path, p.File.Name
		case p.Image != nil:
			where, image = p.Image.Path, true
		}
		out = append(out, f.file(id, where, name, image, true))
	}
	return out
}

// file describes one sent file; live remembers it as sent to id.
func (f *sentFiles) file(id, where, name string, image, live bool) sentFile {
	if name == "" {
		name = path.Base(filepath.ToSlash(where))
	}
	if name == "" || name == "." || name == "/" {
		name = "picture"
	}
	sf := sentFile{Name: name, Image: image && previewable(where)}
	rel, ok := f.rel(where)
	if !ok {
		return sf
	}
	if live {
		f.mu.Lock()
		if len(f.live) >= maxLiveFiles {
			clear(f.live)
		}
		f.live[id+"\x00"+rel] = struct{}{}
		f.mu.Unlock()
	}
	sf.URL = "/api/chats/" + id + "/files?path=" + url.QueryEscape(rel)
	return sf
}

func (f *sentFiles) sentLive(id, rel string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.live[id+"\x00"+rel]
	return ok
}

// previewable reports whether the page may show the file as a picture:
// raster formats only (an SVG can carry script).
func previewable(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

// messageToolArgs are the arguments of a message-tool call the page reads.
type messageToolArgs struct {
	Content string   `json:"content"`
	Channel string   `json:"channel"`
	ChatID  string   `json:"chat_id"`
	Media   []string `json:"media"`
}

// sentHere returns the arguments of call when it is a message-tool call
// that sent to web conversation id (its result, looked up in failed, was
// not an error).
func sentHere(id string, call *llm.ToolCall, failed map[string]bool) (messageToolArgs, bool) {
	var a messageToolArgs
	if call == nil || call.Name != "message" || call.ParseError != "" || failed[call.ID] {
		return a, false
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return a, false
	}
	if (a.Channel != "" && a.Channel != Channel) || (a.ChatID != "" && a.ChatID != id) {
		return a, false
	}
	return a, true
}

// failedCalls returns the ids of the tool calls whose result was an error.
func failedCalls(msgs []llm.Message) map[string]bool {
	failed := map[string]bool{}
	for _, m := range msgs {
		for _, r := range m.ToolResults() {
			if r.IsError {
				failed[r.ToolCallID] = true
			}
		}
	}
	return failed
}

// recorded reports whether conversation id's session records rel as sent
// by the message tool.
func (s *Server) recorded(id, rel string) (bool, error) {
	snap, err := s.deps.Sessions.Get(key(id))
	if err != nil {
		return false, err
	}
	failed := failedCalls(snap.Messages)
	for _, m := range snap.Messages {
		for _, c := range m.ToolCalls() {
			a, ok := sentHere(id, &c, failed)
			if !ok {
				continue
			}
			for _, p := range a.Media {
				if r, ok := s.files.rel(p); ok && r == rel {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// file serves a file the assistant sent to the conversation. Pictures are
// shown inline; everything else is a download, and no file is ever run as
// a page of this origin (a sandbox CSP, nosniff).
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	id, ok := s.chatID(w, r)
	if !ok {
		return
	}
	rel, ok := s.files.rel(r.URL.Query().Get("path"))
	if !ok || filepath.IsAbs(r.URL.Query().Get("path")) {
		writeError(w, http.StatusNotFound, "no such file in this conversation")
		return
	}
	if !s.files.sentLive(id, rel) {
		ok, err := s.recorded(id, rel)
		if err != nil {
			s.internal(w, "read conversation", err)
			return
		}
		if !ok {
			writeError(w, http.StatusNotFound, "no such file in this conversation")
			return
		}
	}
	files, err := workspace.OpenFiles(s.files.ws, nil)
	if err != nil {
		s.internal(w, "open workspace", err)
		return
	}
	defer files.Close()
	// A link out of the workspace, a FIFO or a device is never served.
	f, fi, err := files.Open(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			writeError(w, http.StatusNotFound, "the file is no longer in the workspace")
			return
		}
		s.log.Warn("sent file not served", zap.String("path", rel), zap.Error(err))
		writeError(w, http.StatusNotFound, "the file cannot be served")
		return
	}
	defer func() { _ = f.Close() }()
	if fi.Size() > workspace.MaxSentFileBytes {
		writeError(w, http.StatusNotFound, "the file is larger than the "+bytesize.Format(workspace.MaxSentFileBytes)+" a sent file may be")
		return
	}
	name := path.Base(rel)
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	disposition := "attachment"
	if previewable(name) {
		disposition = "inline"
		h.Set("Content-Type", mime.TypeByExtension(strings.ToLower(filepath.Ext(name))))
	} else {
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Content-Disposition", cmp.Or(mime.FormatMediaType(disposition, map[string]string{"filename": name}), disposition))
	http.ServeContent(w, r, name, fi.ModTime(), f)
}
