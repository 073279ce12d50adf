package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// CSP is the policy of every answer that is not the web page's own (the
// page sets a policy of its own): nothing may load, run or frame it. Plain
// answers (JSON, text, the mux's redirects with their small HTML body)
// need nothing, so an answer a browser renders by mistake can do nothing.
const CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// SmallBody is the largest declared body Config.SmallBodyTimeout applies to.
const SmallBody = 16 << 10

// Config shapes Handler.
type Config struct {
	// Hosts are the host names (lower case, no port) the listener answers
	// to besides loopback names and IP addresses.
	Hosts []string
	// MaxBody is the largest request body any route takes; a longer one is
	// refused at once (413).
	MaxBody int64
	// ReadTimeout bounds reading a request's body.
	ReadTimeout time.Duration
	// SmallBodyTimeout, when shorter, bounds reading a body declared at
	// most SmallBody bytes long (a login, a JSON call): such a body comes
	// in one go, and a client that trickles it only holds a connection.
	SmallBodyTimeout time.Duration
	// Probes are the paths a reserve connection is served (see Listener).
	Probes []string
}

// Handler wraps next, outermost first:
//   - the security headers, on every answer (the page may override its CSP);
//   - the Host check: a name not in cfg.Hosts is refused with 421, so a page
//     whose domain was rebound to this address cannot read any route;
//   - on a reserve connection, only the probes; anything else is told to
//     come back (503, Retry-After);
//   - the request body: larger than MaxBody refused, its reading bounded by
//     ReadTimeout, and an answer given before it was read closes the
//     connection, so the server does not go on draining it.
func Handler(cfg Config, next http.Handler) http.Handler {
	hosts := make(map[string]bool, len(cfg.Hosts)+1)
	for _, h := range cfg.Hosts {
		if h = normalHost(h); h != "" {
			hosts[h] = true
		}
	}
	hosts["localhost"] = true
	probes := make(map[string]bool, len(cfg.Probes))
	for _, p := range cfg.Probes {
		probes[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", CSP)
		h.Set("Referrer-Policy", "no-referrer")
		if !hostAllowed(hosts, r.Host) {
			h.Set("Connection", "close")
			http.Error(w, "421 misdirected request: this server does not answer to host "+
				fmt.Sprintf("%q", r.Host)+" (see gateway.allowed_hosts)", http.StatusMisdirectedRequest)
			return
		}
		if onReserve(r) {
			// One request per reserve connection: the slot goes back at once.
			h.Set("Connection", "close")
			if !probes[r.URL.Path] {
				h.Set("Retry-After", "1")
				http.Error(w, "503 the server is at its connection limit; try again", http.StatusServiceUnavailable)
				return
			}
		}
		if r.ContentLength > cfg.MaxBody {
			h.Set("Connection", "close")
			http.Error(w, fmt.Sprintf("413 request body larger than %d bytes", cfg.MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			// Nothing to read: no deadline, so that an event stream's idle
			// connection is never cut (the server watches it for a close).
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// Reading the body is bounded; once it is read to its end the
		// server lifts the deadline itself (to watch for the client going
		// away), so a long answer or a stream after it is not cut.
		limit := cfg.ReadTimeout
		if r.ContentLength >= 0 && r.ContentLength <= SmallBody && cfg.SmallBodyTimeout > 0 {
			limit = min(limit, cfg.SmallBodyTimeout)
		}
		_ = rc.SetReadDeadline(time.Now().Add(limit))
		b := &body{ReadCloser: http.MaxBytesReader(w, r.Body, cfg.MaxBody)}
		r.Body = b
		ew := &earlyWriter{ResponseWriter: w, body: b}
		next.ServeHTTP(ew, r)
		if !b.eof.Load() {
			// The answer came before the body was read: close rather than
			// drain, and do not wait for a slow client to send the rest.
			if !ew.wrote {
				h.Set("Connection", "close")
			}
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// hostAllowed reports whether a request's Host may be answered. An IP
// address is always allowed: rebinding works through a name the attacker
// controls, and a page can only be same-origin with an address it was
// loaded from. An empty Host (HTTP/1.0) comes from no browser.
func hostAllowed(hosts map[string]bool, hostport string) bool {
	if hostport == "" {
		return true
	}
	h := normalHost(hostport)
	if net.ParseIP(h) != nil {
		return true
	}
	return hosts[h]
}

// normalHost is hostport's host, in lower case, without brackets or a
// trailing dot.
func normalHost(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	return strings.ToLower(h)
}

// body notes when the request body was read to its end.
type body struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

// earlyWriter marks an answer begun before the request body was read to
// its end with Connection: close: the server then sends it at once instead
// of first draining what is left of the body, and closes the connection.
type earlyWriter struct {
	http.ResponseWriter
	body  *body
	wrote bool
}

func (w *earlyWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 { // 1xx answers are not the answer
		w.wrote = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *earlyWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps the stream handlers' http.Flusher working.
func (w *earlyWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *earlyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
