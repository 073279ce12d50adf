package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

// Channel is the channel name of the API's bus messages.
const Channel = "api"

// DefaultModel is the model name that means "the session's model, or the
// configured default".
const DefaultModel = "nanobot"

// Publisher is what the API needs from the bus.
type Publisher interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
}

// Observer is told how each request ended, for metrics: the key's name
// ("unknown" before authentication), an outcome (ok, failed, client_closed,
// timeout, unavailable, unauthorized, rate_limited, busy, bad_request,
// not_found, too_large) and how long it took. It must be cheap and safe for
// concurrent use.
type Observer interface {
	APIRequest(key, outcome string, elapsed time.Duration)
}

type nopObserver struct{}

func (nopObserver) APIRequest(string, string, time.Duration) {}

// Deps are the Server's collaborators.
type Deps struct {
	Bus Publisher
	// Routes are the route names a request's model may name, besides
	// DefaultModel.
	Routes []string
	// Observer is told how requests ended [nothing is].
	Observer Observer
	// Clock is the time of requests and answers [clock.System].
	Clock clock.Clock
}

// Server is the OpenAI-compatible API: an http.Handler for the gateway's
// mux and the channels.Receiver of channel "api". Create it with New,
// register it with the channel manager, mount Handler, and run Run with the
// other intakes; call Close once the manager has delivered everything.
type Server struct {
	cfg    config.APIConfig
	in     Publisher
	models []string
	obs    Observer
	now    func() time.Time
	log    *zap.Logger
	keys   []*apiKey
	// keepAlive is how often a stream that has nothing to say sends an SSE
	// comment, so proxies between the client and here do not close it while
	// a long tool runs [15s].
	keepAlive time.Duration

	mu       sync.Mutex
	closing  bool
	calls    map[string]*call // by chat id
	sessions map[string]*sessionLock
	// publishing counts requests handing their message to the bus, which
	// Run waits for before intake closes.
	publishing sync.WaitGroup
}

var _ channels.Receiver = (*Server)(nil)

// apiKey is one configured key: its name, the hash its token is compared
// by, and its limits.
type apiKey struct {
	name    string
	sum     [sha256.Size]byte
	limiter *rate.Limiter
	slots   chan struct{} // one per request being answered
}

// sessionLock makes one session's requests wait for each other, so the
// agent never merges two requests into one turn.
type sessionLock struct {
	ch    chan struct{} // holds a token while a request of the session runs
	users int
}

// New returns the server; it does no I/O.
func New(cfg config.APIConfig, deps Deps, log *zap.Logger) *Server {
	if deps.Clock == nil {
		deps.Clock = clock.System{}
	}
	s := &Server{cfg: cfg, in: deps.Bus, obs: deps.Observer, now: deps.Clock.Now, log: log,
		calls: map[string]*call{}, sessions: map[string]*sessionLock{}, keepAlive: 15 * time.Second}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	s.models = append([]string{DefaultModel}, slices.Sorted(slices.Values(deps.Routes))...)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Keys {
			if !yield(n) {
				return
			}
		}
	}) {
		s.keys = append(s.keys, &apiKey{
			name:    name,
			sum:     sha256.Sum256([]byte(cfg.Keys[name])),
			limiter: rate.NewLimiter(rate.Limit(float64(cfg.RatePerMinute)/60), max(cfg.Burst, 1)),
			slots:   make(chan struct{}, max(cfg.MaxConcurrent, 1)),
		})
	}
	return s
}

// Handler serves /v1/chat/completions, /v1/models and OpenAI-shaped 404s
// for the rest of /v1/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.authed(s.chat))
	mux.HandleFunc("GET /v1/models", s.authed(s.listModels))
	mux.HandleFunc("GET /v1/models/{id}", s.authed(s.getModel))
	mux.HandleFunc("/v1/", s.authed(func(w http.ResponseWriter, r *http.Request, _ *apiKey, start time.Time) {
		s.fail(w, r, "unknown", start, &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
			message: "Unknown request URL: " + r.Method + " " + r.URL.Path + ". This server offers POST /v1/chat/completions and GET /v1/models.",
			outcome: "not_found"})
	}))
	return mux
}

// authed serves h to a request whose bearer token names a key
// (authenticate), with the key and the time the request came; any other
// request is refused.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, k *apiKey, start time.Time)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		k, aerr := s.authenticate(r)
		if aerr != nil {
			s.fail(w, r, "unknown", start, aerr)
			return
		}
		h(w, r, k, start)
	}
}

// Run serves until ctx ends, then refuses new requests (503) and waits for
// those handing their message to the bus, so the bus's inbound side may be
// closed after it returns.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.publishing.Wait()
	return nil
}

// Close ends the requests still waiting for an answer (the agent stopped
// before giving one); call it once the channel manager has delivered what
// the agent published.
func (s *Server) Close() {
	s.mu.Lock()
	calls := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	for _, c := range calls {
		s.finish(c, endShutdown)
	}
}

// Receive takes the agent's outbound messages for channel "api" (see
// channels.Receiver). It never blocks.
func (s *Server) Receive(m bus.OutboundMessage) {
	s.mu.Lock()
	c := s.calls[m.ChatID]
	s.mu.Unlock()
	if c == nil {
		// The request ended (timeout, shutdown), or the message is for no
		// request at all (a reminder, a background task's result): it is
		// in the session, and no client waits for it.
		s.log.Debug("message for no waiting request", zap.String("chat", m.ChatID), zap.Stringer("kind", m.Kind))
		return
	}
	if c.receive(m) {
		s.finish(c, endAnswered)
	}
}

// finish ends c once: it is forgotten, its slots are given back and its
// handler (if still there) wakes up.
func (s *Server) finish(c *call, why endReason) {
	if why != endAnswered && !c.stop(why) {
		return
	}
	s.mu.Lock()
	if s.calls[c.id] != c {
		s.mu.Unlock()
		return
	}
	delete(s.calls, c.id)
	s.mu.Unlock()
	c.timer.Stop()
	c.release()
	close(c.done)
}

// authenticate finds the key of the request's bearer token. Every
// configured key is compared, in constant time, by its SHA-256, so neither
// the match nor the token's length shows in the timing.
func (s *Server) authenticate(r *http.Request) (*apiKey, *apiError) {
	unauthorized := func(msg string) *apiError {
		return &apiError{status: http.StatusUnauthorized, message: msg, typ: "invalid_request_error",
			code: "invalid_api_key", outcome: "unauthorized"}
	}
	if len(s.keys) == 0 {
		return nil, unauthorized("This nanobot has no API keys configured (api.keys), so its API refuses every request.")
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, unauthorized("You didn't provide an API key. Send it in the header Authorization: Bearer <key>.")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	var found *apiKey
	for _, k := range s.keys {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found = k
		}
	}
	if found == nil {
		return nil, unauthorized("Incorrect API key provided.")
	}
	return found, nil
}

// admit applies the key's rate and concurrency limits; on success the
// caller holds one of the key's slots.
func (s *Server) admit(k *apiKey) *apiError {
	now := s.now()
	res := k.limiter.ReserveN(now, 1)
	if d := res.DelayFrom(now); !res.OK() || d > 0 {
		res.CancelAt(now)
		return &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			message:    "Rate limit reached for this key (api.rate_per_minute). Please try again later.",
			retryAfter: max(d, time.Second), outcome: "rate_limited"}
	}
	select {
	case k.slots <- struct{}{}:
		return nil
	default:
		return &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			message:    "Too many requests of this key are being answered at once (api.max_concurrent). Please try again shortly.",
			retryAfter: time.Second, outcome: "busy"}
	}
}

// lockSession waits until no other request of session runs, at most
// turn_timeout; the returned func unlocks it and never blocks.
func (s *Server) lockSession(ctx context.Context, session string) (func(), *apiError) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TurnTimeout)
	defer cancel()
	s.mu.Lock()
	l := s.sessions[session]
	if l == nil {
		l = &sessionLock{ch: make(chan struct{}, 1)}
		s.sessions[session] = l
	}
	l.users++
	s.mu.Unlock()
	drop := func() {
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.sessions, session)
		}
		s.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "session_busy", outcome: "busy",
				retryAfter: 5 * time.Second,
				message:    "This session is still answering an earlier request (one at a time per session). Please try again shortly."}
		}
		return nil, &apiError{status: 499, typ: "invalid_request_error", message: "client closed the request", outcome: "client_closed"}
	}
}

// sessionID is what a client may name its session with, in at most 128
// characters (validSessionID). The length is checked apart: {1,128} in the
// pattern would compile into a program many times larger at every start
// (sizes: docs/BENCHMARKS.md#figures-behind-code-choices).
var sessionID = regexp.MustCompile(`^[A-Za-z0-9._@+-]+$`)

func validSessionID(s string) bool { return len(s) <= 128 && sessionID.MatchString(s) }

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// unavailable is the answer once shutdown began.
var unavailable = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "unavailable",
	message: "The server is shutting down. Please try again in a moment.", retryAfter: 5 * time.Second, outcome: "unavailable"}
