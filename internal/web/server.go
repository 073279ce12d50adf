package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/session"
)

// Channel is the web channel's name on the bus; its sessions are web:<id>.
const Channel = "web"

//go:embed static
var staticFS embed.FS

// csp allows nothing inline: scripts and styles come only from the page's
// own files, so model output inserted as HTML can never run script.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var errClosed = errors.New("web: shutting down")

// Publisher is the part of the bus the page needs.
type Publisher interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
}

type sessionInfo = session.Info

// Sessions is the part of the session store the page reads.
type Sessions interface {
	Get(key string) (session.Snapshot, error)
	List() ([]session.Info, error)
}

// Deps are what the page works with.
type Deps struct {
	Bus      Publisher
	Sessions Sessions
	// Workspace receives uploaded files under inbox/.
	Workspace string
	// StateFile keeps the conversations' list and titles.
	StateFile string
	// TokenFile holds the login token when channels.web.token is empty.
	TokenFile string
	// Panel serves the control panel's data [no panel].
	Panel *Panel
	// Setup serves the first-run setup view (setup.go) [none].
	Setup Setup
	// Clock is the time of sessions, conversations and messages
	// [clock.System].
	Clock clock.Clock
}

// Server is the web channel: the page, its API and its event streams. It
// implements channels.Receiver.
type Server struct {
	cfg   config.WebChannelConfig
	deps  Deps
	log   *zap.Logger
	auth  *auth
	hub   *hub
	files *sentFiles
	convs *conversations
	mux   *http.ServeMux
}

var _ channels.Receiver = (*Server)(nil)

// New builds the server; it does no I/O.
func New(cfg config.WebChannelConfig, deps Deps, log *zap.Logger) *Server {
	if deps.Clock == nil {
		deps.Clock = clock.System{}
	}
	token := func() (string, error) {
		if cfg.Token != "" {
			return cfg.Token, nil
		}
		return ReadTokenFile(deps.TokenFile)
	}
	// Validated with the configuration: an entry that does not parse was
	// refused there.
	trusted, _ := config.ParseTrustedProxies(cfg.TrustedProxies)
	s := &Server{cfg: cfg, deps: deps, log: log,
		auth:  newAuth(token, cfg.SessionTTL, strings.HasPrefix(cfg.PublicURL, "https://"), trusted, deps.Clock.Now, log),
		files: newSentFiles(deps.Workspace),
		convs: newConversations(deps.StateFile, deps.Clock.Now),
		mux:   http.NewServeMux()}
	if p := deps.Panel; p != nil {
		p.sessions, p.now, p.log = deps.Sessions, deps.Clock.Now, log.Named("panel")
	}
	s.hub = newHub(deps.Sessions, s.files)
	s.auth.describe = s.describe
	s.routes()
	return s
}

func (s *Server) routes() {
	api := func(pattern string, h http.HandlerFunc) {
		s.mux.Handle(pattern, s.auth.require(h))
	}
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /assets/{file}", s.asset)
	s.mux.HandleFunc("POST /api/login", s.auth.handleLogin)
	api("POST /api/logout", func(w http.ResponseWriter, r *http.Request) {
		s.auth.end(w, r)
		w.WriteHeader(http.StatusNoContent)
	})
	api("GET /api/session", s.session)
	api("GET /api/chats", s.listChats)
	api("POST /api/chats", s.createChat)
	api("PATCH /api/chats/{id}", s.renameChat)
	api("DELETE /api/chats/{id}", s.deleteChat)
	s.mux.Handle("GET /api/chats/{id}/events", sameOrigin(s.auth.require(http.HandlerFunc(s.events))))
	api("POST /api/chats/{id}/messages", s.send)
	api("GET /api/chats/{id}/files", s.file)
	api("POST /api/chats/{id}/stop", s.stop)
	if p := s.deps.Panel; p != nil {
		p.routes(api)
	}
	if s.deps.Setup != nil {
		s.setupRoutes(api)
	}
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API endpoint")
	})
}

// Handler serves the page and its API, with the security headers on every
// answer and cross-origin state changes refused.
func (s *Server) Handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	h := cop.Handler(s.mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// Receive takes the web channel's outbound messages (channels.Receiver).
func (s *Server) Receive(m bus.OutboundMessage) { s.hub.receive(m) }

// CloseStreams ends every open event stream and refuses new ones, so that
// the HTTP server can shut down without waiting for pages.
func (s *Server) CloseStreams() { s.hub.close() }

// IssueLink returns a one-time login code valid for 10 minutes.
func (s *Server) IssueLink() string { return s.auth.IssueLink() }

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, r, "index.html", "text/html; charset=utf-8")
}

var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ext := name[strings.LastIndexByte(name, '.')+1:]
	typ, ok := assetTypes["."+ext]
	if !ok || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	serveStatic(w, r, name, typ)
}

// staticFile is an embedded file and its gzip encoding, made once.
type staticFile struct {
	plain, gz []byte
}

var (
	staticMu    sync.Mutex
	staticCache = map[string]*staticFile{}
)

func loadStatic(name string) (*staticFile, error) {
	staticMu.Lock()
	defer staticMu.Unlock()
	if f, ok := staticCache[name]; ok {
		return f, nil
	}
	data, err := fs.ReadFile(staticFS, "static/"+name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // a valid level: no error
	_, _ = zw.Write(data)
	_ = zw.Close()
	f := &staticFile{plain: data, gz: b.Bytes()}
	staticCache[name] = f
	return f, nil
}

// serveStatic sends an embedded file, gzipped when the browser takes it.
// no-cache makes the browser revalidate (the files change with the
// binary); the ETag makes that cheap.
func serveStatic(w http.ResponseWriter, r *http.Request, name, typ string) {
	f, err := loadStatic(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", typ)
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	tag := etagOf(f.plain)
	h.Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		_, _ = w.Write(f.gz)
		return
	}
	_, _ = w.Write(f.plain)
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	l, _ := s.auth.current(r)
	writeJSON(w, http.StatusOK, s.describe(l))
}

// describe is what the page learns of its login, from GET /api/session and
// from the login itself: its CSRF token and whether the control panel is
// there.
func (s *Server) describe(l login) any {
	return map[string]any{"csrf": l.csrf, "panel": s.deps.Panel != nil,
		"setup": s.deps.Setup != nil && s.deps.Setup.State().Needed}
}
