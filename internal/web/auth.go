package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

const (
	cookieName = "nanobot_session"
	csrfHeader = "X-CSRF-Token"
	// linkTTL is how long a one-time login link (/web) stays valid.
	linkTTL = 10 * time.Minute
	// maxSessions and maxLinks bound the login state a flood could grow.
	maxSessions = 1024
	maxLinks    = 64
)

// Failed logins back off per client (5, then one every 12 s), and all
// clients' failures together are bounded too (20, then one a second). Only
// failures count: the token is compared first, so a correct token or link
// always gets in, whatever others sent from the same address. What keeps a
// guesser out is the token's size (32 random bytes when generated); the
// limits tell a failing client to stop and keep the log quiet.
var (
	failPerClient = rate.Every(12 * time.Second)
	failBurst     = 5
	failGlobal    = rate.Every(time.Second)
	failGlobalB   = 20
)

// maxClients bounds the per-client map: past it, clients without a recent
// failure are dropped, and when none is, new ones share one overflow
// bucket (which rotating addresses may drain, costing nothing but a 429
// instead of a 401 to failing logins).
const maxClients = 4096

// NewToken returns a fresh random login token (32 bytes, base64url).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("web token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ReadTokenFile returns the token kept in path (trimmed); an empty or
// missing file is an error that says how to make one.
func ReadTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("web token file %s does not exist (run `nanobot web token --rotate`)", path)
	}
	if err != nil {
		return "", fmt.Errorf("web token: %w", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("web token file %s is empty (run `nanobot web token --rotate`)", path)
	}
	return t, nil
}

// WriteTokenFile writes token to path with mode 0600.
func WriteTokenFile(path, token string) error {
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write web token: %w", err)
	}
	// WriteFile keeps the mode of an existing file: tighten it.
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("write web token: %w", err)
	}
	return nil
}

// EnsureTokenFile creates the token file when it is missing and reports
// whether it did. The token is written to a file of its own first and then
// linked into place, which fails if path exists: a reader (the login, or
// `nanobot web token` run at the same moment) sees no file or the whole
// token, never an empty file, and a token another process made is kept.
func EnsureTokenFile(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	t, err := NewToken()
	if err != nil {
		return false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return false, fmt.Errorf("create web token: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.WriteString(t + "\n"); err != nil {
		_ = f.Close()
		return false, fmt.Errorf("create web token: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("create web token: %w", err)
	}
	if err := os.Link(tmp, path); errors.Is(err, os.ErrExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("create web token: %w", err)
	}
	return true, nil
}

// login is a logged-in browser.
type login struct {
	csrf    string
	expires time.Time
}

// auth keeps the logged-in browsers and the one-time links, in memory: a
// restart logs everyone out, which is the safe direction.
type auth struct {
	token  func() (string, error)
	ttl    time.Duration
	secure bool
	now    func() time.Time
	log    *zap.Logger
	// describe is the body of a login's answer, the same as GET
	// /api/session's so the page knows at once what it may show (the
	// control panel button); the server sets it [the CSRF token only].
	describe func(login) any

	// trusted are the reverse proxies whose forwarding headers name the
	// client (channels.web.trusted_proxies).
	trusted []netip.Prefix

	mu       sync.Mutex
	sessions map[string]login     // by sha256 of the cookie value
	links    map[string]time.Time // one-time link codes (hashed) → expiry
	// failures are the failed logins' buckets, per client (an IPv4
	// address, an IPv6 /64), all of them together, and for clients past
	// maxClients.
	failures  map[netip.Prefix]*rate.Limiter
	maxFailed int // the bound of failures: maxClients
	global    *rate.Limiter
	overflow  *rate.Limiter
	lastPrune time.Time
}

func newAuth(token func() (string, error), ttl time.Duration, secure bool, trusted []netip.Prefix, now func() time.Time, log *zap.Logger) *auth {
	return &auth{token: token, ttl: ttl, secure: secure, trusted: trusted, now: now, log: log,
		sessions: map[string]login{}, links: map[string]time.Time{}, failures: map[netip.Prefix]*rate.Limiter{}, maxFailed: maxClients,
		global: rate.NewLimiter(failGlobal, failGlobalB), overflow: rate.NewLimiter(failPerClient, failBurst)}
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return string(h[:])
}

// equal compares two secrets in constant time (their hashes, so that the
// length does not show either).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func randomID() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

// failed counts a failed login of client and reports whether it is still
// within the limits (false: it should back off).
func (a *auth) failed(client netip.Prefix) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	l, ok := a.failures[client]
	if !ok && len(a.failures) >= a.maxFailed && now.Sub(a.lastPrune) >= time.Second {
		// A client whose bucket is full again has no failure to remember.
		a.lastPrune = now
		for k, cl := range a.failures {
			if cl.TokensAt(now) >= float64(failBurst) {
				delete(a.failures, k)
			}
		}
	}
	switch {
	case ok:
	case len(a.failures) < a.maxFailed:
		l = rate.NewLimiter(failPerClient, failBurst)
		a.failures[client] = l
	default:
		l = a.overflow
	}
	return l.AllowN(now, 1) && a.global.AllowN(now, 1)
}

// clientOf is who sent r, for the login limits: the connection's address,
// or, from a trusted proxy, the nearest untrusted address its forwarding
// header names. IPv6 clients count by /64, the block one host usually has.
func (a *auth) clientOf(r *http.Request) netip.Prefix {
	addr := clientAddr(r, a.trusted)
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, err := addr.Prefix(bits)
	if err != nil { // an unparsable address: all such share one bucket
		return netip.Prefix{}
	}
	return p
}

// clientAddr walks the forwarding chain from the nearest hop: each trusted
// proxy's word is taken for the hop before it, and the first address not
// trusted is the client. Forwarded (RFC 7239) is read when present, else
// X-Forwarded-For; headers from an untrusted peer are ignored, since anyone
// can send them.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	addr := peer.Addr().Unmap()
	if err != nil {
		addr, _ = netip.ParseAddr(r.RemoteAddr)
		addr = addr.Unmap()
	}
	if !isTrusted(addr, trusted) {
		return addr
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return addr // a hop that is no address: trust nothing past it
		}
		addr = hop
		if !isTrusted(hop, trusted) {
			break
		}
	}
	return addr
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor lists the client chain a proxy reported, oldest first.
func forwardedFor(h http.Header) []string {
	var hops []string
	if fw := h.Values("Forwarded"); len(fw) > 0 {
		for _, elem := range strings.Split(strings.Join(fw, ","), ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hops = append(hops, strings.Trim(v, `"`))
				}
			}
		}
		return hops
	}
	for _, v := range strings.Split(strings.Join(h.Values("X-Forwarded-For"), ","), ",") {
		if v = strings.TrimSpace(v); v != "" {
			hops = append(hops, v)
		}
	}
	return hops
}

// parseHop reads one hop: an address, with or without port and brackets.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap(), err == nil
}

// IssueLink returns a one-time login code valid for linkTTL.
func (a *auth) IssueLink() string {
	code := randomID()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, exp := range a.links {
		if now.After(exp) {
			delete(a.links, k)
		}
	}
	if len(a.links) >= maxLinks {
		clear(a.links)
	}
	a.links[hashOf(code)] = now.Add(linkTTL)
	return code
}

// useLink consumes a one-time code; it reports whether it was valid.
func (a *auth) useLink(code string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := hashOf(code)
	exp, ok := a.links[k]
	delete(a.links, k)
	return ok && !a.now().After(exp)
}

// start logs a browser in: a new session and its cookie.
func (a *auth) start(w http.ResponseWriter) login {
	id := randomID()
	l := login{csrf: randomID(), expires: a.now().Add(a.ttl)}
	a.mu.Lock()
	now := a.now()
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	if len(a.sessions) >= maxSessions {
		clear(a.sessions)
	}
	a.sessions[hashOf(id)] = l
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: a.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(a.ttl / time.Second)})
	return l
}

// current returns the session of r's cookie.
func (a *auth) current(r *http.Request) (login, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return login{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := hashOf(c.Value)
	l, ok := a.sessions[k]
	if ok && a.now().After(l.expires) {
		delete(a.sessions, k)
		return login{}, false
	}
	return l, ok
}

// end logs r's browser out.
func (a *auth) end(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.sessions, hashOf(c.Value))
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: a.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// handleLogin checks a token or a one-time link code and logs the browser
// in. The token is never logged, and a wrong one is not told apart from a
// wrong code. The secret is compared before any limit is looked at: only a
// failure counts against its client (see failed).
func (a *auth) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
		Link  string `json:"link"`
	}
	if !decodeJSON(w, r, &req, 4<<10) {
		return
	}
	ok := false
	switch {
	case req.Link != "":
		ok = a.useLink(req.Link)
	case req.Token != "":
		want, err := a.token()
		if err != nil {
			a.log.Error("web login: no token to compare with", zap.Error(err))
			writeError(w, http.StatusServiceUnavailable, "the gateway has no web token; run `nanobot web token --rotate` and try again")
			return
		}
		ok = equal(req.Token, want)
	}
	client := a.clientOf(r)
	if !ok {
		if !a.failed(client) {
			w.Header().Set("Retry-After", "60")
			writeError(w, http.StatusTooManyRequests, "too many failed login attempts; wait a minute and try again")
			return
		}
		a.log.Warn("web login refused", zap.Stringer("client", client), zap.String("remote", r.RemoteAddr))
		writeError(w, http.StatusUnauthorized, "wrong or expired token or link")
		return
	}
	l := a.start(w)
	a.log.Info("web login", zap.Stringer("client", client), zap.String("remote", r.RemoteAddr), zap.Bool("link", req.Link != ""))
	if a.describe != nil {
		writeJSON(w, http.StatusOK, a.describe(l))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"csrf": l.csrf})
}

// require wraps h: the browser must be logged in, and a state-changing
// request must carry the session's CSRF token.
func (a *auth) require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := a.current(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "not logged in")
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if got := r.Header.Get(csrfHeader); got == "" || !equal(got, l.csrf) {
				writeError(w, http.StatusForbidden, "missing or wrong CSRF token; reload the page")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a request that a browser marks as coming from another
// site (the event stream is a GET, which CrossOriginProtection lets pass).
func sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !originMatches(o, r.Host) {
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func originMatches(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(rest, host)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// decodeJSON reads a JSON body of at most max bytes into v; on failure it
// answers 400 (or 413) and reports false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, max int64) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", max))
			return false
		}
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return false
	}
	return true
}
