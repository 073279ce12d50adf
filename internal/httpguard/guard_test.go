package httpguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience is how long a test waits for what must happen; nothing here
// measures time, it only keeps a broken server from hanging the test.
const patience = 5 * time.Second

// server runs a guarded http.Server on a real listener of 127.0.0.1:0.
type server struct {
	t    *testing.T
	addr string
	ln   *Listener
}

func serve(t *testing.T, maxConns int, cfg Config, idle time.Duration, h http.Handler) *server {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = time.Hour
	}
	if cfg.Probes == nil {
		cfg.Probes = []string{"/healthz"}
	}
	ln := Listen(inner, maxConns)
	srv := &http.Server{Handler: Handler(cfg, h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle,
		ConnState: ln.ConnState, ConnContext: ConnContext}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return &server{t: t, addr: inner.Addr().String(), ln: ln}
}

// dial opens a raw connection; the test ends it.
func (s *server) dial() net.Conn {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, patience)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip sends raw on c and reads one response.
//
//bodyclose:handled
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// get answers path on a fresh connection.
//
//bodyclose:handled
func (s *server) get(path string, hdr ...string) *http.Response {
	s.t.Helper()
	c := s.dial()
	defer func() { _ = c.Close() }()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + s.addr + "\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	return roundTrip(s.t, c, bufio.NewReader(c), req+"\r\n")
}

// closedByServer reports whether the server closed c (a read ends in EOF
// or a reset) within patience.
func closedByServer(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(patience))
	_, err := br.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// busy reports the ordinary connections open and how many of them idle.
func (l *Listener) busy() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, len(l.idle)
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// A flood of idle keep-alive connections past the cap: the server closes
// the longest idle ones to take new clients, which are answered.
func TestIdleConnectionsMakeRoomAtTheCap(t *testing.T) {
	const maxConns, flood = 4, 20
	s := serve(t, maxConns, Config{}, time.Hour, http.HandlerFunc(ok))
	type idleConn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var idle []idleConn
	for range flood {
		c := s.dial()
		br := bufio.NewReader(c)
		if resp := roundTrip(t, c, br, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		idle = append(idle, idleConn{c, br})
	}
	if resp := s.get("/x"); resp.StatusCode != 200 {
		t.Fatalf("new client past the cap: %d", resp.StatusCode)
	}
	// Each admission past the cap closed one idle connection: all but
	// maxConns of the flood and the new client.
	closedCh := make(chan bool, len(idle))
	for _, ic := range idle {
		go func() { closedCh <- closedByServer(ic.c, ic.br) }()
	}
	want, closed := flood+1-maxConns, 0
	for range idle {
		if <-closedCh {
			closed++
		}
		if closed == want {
			break // the rest stay open until their reads time out
		}
	}
	if closed != want {
		t.Errorf("%d idle connections closed, want %d (cap %d)", closed, want, maxConns)
	}
	if n, _ := s.ln.Open(); n > maxConns {
		t.Errorf("%d ordinary connections open, cap %d", n, maxConns)
	}
}

// Every ordinary slot busy with a slow upload: the reserve still answers
// the health probe, and tells anything else to come back.
func TestReserveAnswersProbesOnly(t *testing.T) {
	const maxConns = 3
	s := serve(t, maxConns, Config{}, time.Hour, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ok(w, r)
	}))
	var reserved atomic.Int32
	s.ln.mu.Lock()
	s.ln.OnReserve = func() { reserved.Add(1) }
	s.ln.mu.Unlock()
	for range maxConns {
		c := s.dial()
		// A body that never finishes: the connection stays busy.
		if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
	}
	// Busy means past the request header: before it a connection counts
	// as idle, and a new one could take its place.
	deadline := time.Now().Add(patience)
	for n, idle := s.ln.busy(); n < maxConns || idle > 0; n, idle = s.ln.busy() {
		if time.Now().After(deadline) {
			t.Fatalf("only %d slow uploads busy", n-idle)
		}
		time.Sleep(5 * time.Millisecond)
	}
	probe := s.get("/healthz")
	if probe.StatusCode != 200 || !probe.Close {
		t.Errorf("probe on the reserve: %d, close %v; want 200 and Connection: close", probe.StatusCode, probe.Close)
	}
	other := s.get("/x")
	if other.StatusCode != http.StatusServiceUnavailable || other.Header.Get("Retry-After") == "" || !other.Close {
		t.Errorf("page on the reserve: %d %v, want 503 with Retry-After and Connection: close", other.StatusCode, other.Header)
	}
	if n := reserved.Load(); n != 2 {
		t.Errorf("OnReserve called %d times, want 2", n)
	}
}

// A body that stops arriving is given up after ReadTimeout.
func TestSlowBodyIsCut(t *testing.T) {
	s := serve(t, 10, Config{ReadTimeout: 200 * time.Millisecond}, time.Hour,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
				return
			}
			ok(w, r)
		}))
	c := s.dial()
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("stalled body: %d close=%v, want 408 and close", resp.StatusCode, resp.Close)
	}
	if !closedByServer(c, br) {
		t.Error("connection still open after the stalled body")
	}
}

// A small declared body (a login) that stops arriving is given up after
// SmallBodyTimeout, well before ReadTimeout; a large one keeps ReadTimeout.
func TestSlowSmallBodyIsCutSooner(t *testing.T) {
	s := serve(t, 10, Config{ReadTimeout: time.Hour, SmallBodyTimeout: 100 * time.Millisecond}, time.Hour,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
				return
			}
			ok(w, r)
		}))
	c := s.dial()
	br := bufio.NewReader(c)
	resp := roundTrip(t, c, br, fmt.Sprintf("POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n{\"tok", SmallBody))
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("stalled small body: %d close=%v, want 408 and close", resp.StatusCode, resp.Close)
	}
}

// An answer given before the body was read (a 429, say) is sent at once
// with Connection: close; the server does not wait for the rest of the body.
func TestEarlyAnswerClosesInsteadOfDraining(t *testing.T) {
	s := serve(t, 10, Config{}, time.Hour, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	for _, tt := range []struct{ name, req string }{
		{"content-length", "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\nabc"},
		{"chunked", "POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dial()
			br := bufio.NewReader(c)
			_ = c.SetDeadline(time.Now().Add(patience))
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no early answer while the body is unfinished: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 429 || !resp.Close {
				t.Errorf("status %d close=%v, want 429 with Connection: close", resp.StatusCode, resp.Close)
			}
			if !closedByServer(c, br) {
				t.Error("connection kept open for the rest of the body")
			}
		})
	}
}

// Once the body is read, a long answer streams past ReadTimeout; a stream
// without a body (an event stream) is never cut by it.
func TestStreamsOutliveTheReadTimeout(t *testing.T) {
	const events = 6
	s := serve(t, 10, Config{ReadTimeout: 100 * time.Millisecond}, time.Hour,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher) // the guard keeps the stream handlers' Flusher
			for i := range events {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(60 * time.Millisecond):
				}
				_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
				fl.Flush()
			}
		}))
	for _, req := range []string{
		"POST /s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}",
		"GET /s HTTP/1.1\r\nHost: localhost\r\n\r\n",
	} {
		c := s.dial()
		_ = c.SetDeadline(time.Now().Add(patience))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.Count(string(body), "data: "); err != nil || got != events {
			t.Errorf("%s: %d events (%v), want %d", strings.Fields(req)[0], got, err, events)
		}
	}
}

// The Host check: names must be configured; loopback names and IP
// addresses always pass.
func TestHostCheck(t *testing.T) {
	s := serve(t, 10, Config{Hosts: []string{"Bot.Example.com"}}, time.Hour, http.HandlerFunc(ok))
	tests := []struct {
		host string
		want int
	}{
		{"rebound.attacker.example:18790", http.StatusMisdirectedRequest},
		{"attacker.example", http.StatusMisdirectedRequest},
		{"localhost.attacker.example", http.StatusMisdirectedRequest},
		{"localhost:18790", 200},
		{"LOCALHOST", 200},
		{"127.0.0.1:18790", 200},
		{"[::1]:18790", 200},
		{"192.0.2.10", 200},
		{"bot.example.com", 200},
		{"bot.example.com.:443", 200},
	}
	for _, tt := range tests {
		c := s.dial()
		resp := roundTrip(t, c, bufio.NewReader(c), "GET /metrics HTTP/1.1\r\nHost: "+tt.host+"\r\n\r\n")
		_ = c.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %q: %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
	}
}

// Every answer carries the security headers: the mux's own redirects and
// 404s, plain text and JSON.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/", ok)
	mux.HandleFunc("GET /healthz", ok)
	s := serve(t, 10, Config{}, time.Hour, mux)
	for _, path := range []string{"/v1", "/healthz", "/nothing", "/v1/../healthz"} {
		resp := s.get(path)
		h := resp.Header
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s (%d): headers %v", path, resp.StatusCode, h)
		}
	}
}

// A declared body larger than any route takes is refused before it is read.
func TestBodyLargerThanAnyRouteRefused(t *testing.T) {
	s := serve(t, 10, Config{MaxBody: 1000}, time.Hour, http.HandlerFunc(ok))
	c := s.dial()
	resp := roundTrip(t, c, bufio.NewReader(c), "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1001\r\n\r\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Errorf("status %d close=%v, want 413 and close", resp.StatusCode, resp.Close)
	}
}

// An idle keep-alive connection is closed after the server's IdleTimeout
// (set by the gateway).
func TestIdleConnectionClosed(t *testing.T) {
	s := serve(t, 10, Config{}, 100*time.Millisecond, http.HandlerFunc(ok))
	c := s.dial()
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if !closedByServer(c, br) {
		t.Error("idle connection still open")
	}
}
