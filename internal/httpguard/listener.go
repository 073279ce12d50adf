// Package httpguard holds the gateway listener's defences against hostile
// clients (docs/web.md and docs/api.md, "Security"): a cap on open
// connections that closes idle ones first and keeps a reserve for the
// health probes, the Host check against DNS rebinding, bounded request
// reading, and the security headers on every answer.
package httpguard

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Reserve is how many connections past the cap are still accepted, to
// answer the health probes (/healthz, /readyz) while ordinary clients hold
// every other slot; they serve one request each and are closed.
const Reserve = 8

// reserveHeaderTimeout is how long a reserve connection may take to send
// its request header: a probe sends it at once, and a slow client must not
// hold the reserve for the server's full header timeout.
const reserveHeaderTimeout = 2 * time.Second

// Listener caps the open connections of an http.Server. A new connection
// past the cap takes the place of the longest idle one (a keep-alive
// connection between requests, or one that has not sent a whole request
// header yet): closing those loses no work, so a flood of idle connections
// cannot keep new clients out. When every slot is busy it is taken into
// the reserve, for probes only (see Handler); with the reserve full too,
// Accept waits for a slot and new connections queue in the kernel.
//
// The server must call ConnState (set http.Server.ConnState to it) so that
// the listener knows which connections are idle, and ConnContext so that
// handlers know a reserve connection.
type Listener struct {
	net.Listener
	max int
	// OnReserve, when set (before serving), is called outside any lock each
	// time a connection is taken into the reserve: every ordinary slot is
	// busy with a request.
	OnReserve func()

	mu       sync.Mutex
	open     int // ordinary connections not yet released
	reserved int // reserve connections not yet released
	// idle are the ordinary connections without a request in progress,
	// with the time they became so.
	idle  map[*conn]time.Time
	freed chan struct{} // a token when a slot is released or a connection idles
	done  chan struct{}
	once  sync.Once
}

// Listen wraps ln so that at most max ordinary connections (plus Reserve)
// are open at once.
func Listen(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, max: max, idle: map[*conn]time.Time{},
		freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept waits for a slot, then for a connection, and admits it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		if err := l.waitRoom(); err != nil {
			return nil, err
		}
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		for {
			c, victim := l.admit(nc)
			if victim != nil {
				// Outside the lock: Close may block briefly on the socket.
				_ = victim.Conn.Close()
			}
			if c != nil {
				if c.reserve && l.OnReserve != nil {
					l.OnReserve()
				}
				return c, nil
			}
			// The room seen before Accept was taken meanwhile: hold the
			// connection until a slot is released.
			if err := l.waitFreed(); err != nil {
				_ = nc.Close()
				return nil, err
			}
		}
	}
}

// waitRoom returns once a connection could be admitted.
func (l *Listener) waitRoom() error {
	for {
		l.mu.Lock()
		room := l.open < l.max || len(l.idle) > 0 || l.reserved < Reserve
		l.mu.Unlock()
		if room {
			return nil
		}
		if err := l.waitFreed(); err != nil {
			return err
		}
	}
}

func (l *Listener) waitFreed() error {
	select {
	case <-l.freed:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

// admit takes nc into an ordinary slot, into one freed by evicting the
// longest idle connection (returned, to be closed by the caller), or into
// the reserve; nil when none is free.
func (l *Listener) admit(nc net.Conn) (c, victim *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c = &conn{Conn: nc, l: l}
	switch {
	case l.open < l.max:
		l.open++
	case len(l.idle) > 0:
		var oldest time.Time
		for ic, since := range l.idle {
			if victim == nil || since.Before(oldest) {
				victim, oldest = ic, since
			}
		}
		delete(l.idle, victim)
		victim.released = true // its slot passes to c
	case l.reserved < Reserve:
		l.reserved++
		c.reserve = true
		// A probe sends its request at once; see reserveHeaderTimeout.
		_ = nc.SetReadDeadline(time.Now().Add(reserveHeaderTimeout))
	default:
		return nil, nil
	}
	return c, victim
}

// release gives c's slot back (once).
func (l *Listener) release(c *conn) {
	l.mu.Lock()
	if !c.released {
		c.released = true
		delete(l.idle, c)
		if c.reserve {
			l.reserved--
		} else {
			l.open--
		}
	}
	l.mu.Unlock()
	l.signal()
}

// ConnState tracks which connections are idle; set it as
// http.Server.ConnState.
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.reserve {
		return
	}
	l.mu.Lock()
	if c.released {
		l.mu.Unlock()
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		l.idle[c] = time.Now()
		l.mu.Unlock()
		l.signal() // a waiting Accept may now take its place
	default: // active, hijacked or closed: not to be evicted
		delete(l.idle, c)
		l.mu.Unlock()
	}
}

// signal wakes a waiting Accept.
func (l *Listener) signal() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Open reports the connections open now: ordinary and reserve.
func (l *Listener) Open() (ordinary, reserve int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.reserved
}

// Close stops Accept.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn is an admitted connection; Close releases its slot.
type conn struct {
	net.Conn
	l        *Listener
	reserve  bool
	released bool // guarded by l.mu
	once     sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.release(c) })
	return c.Conn.Close()
}

// SetReadDeadline keeps a reserve connection's header deadline short: the
// server would otherwise replace it with its own ReadHeaderTimeout.
func (c *conn) SetReadDeadline(t time.Time) error {
	if c.reserve {
		if limit := time.Now().Add(reserveHeaderTimeout); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

type reserveKey struct{}

// ConnContext marks the requests of a reserve connection; set it as
// http.Server.ConnContext.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*conn); ok && c.reserve {
		return context.WithValue(ctx, reserveKey{}, true)
	}
	return ctx
}

func onReserve(r *http.Request) bool {
	v, _ := r.Context().Value(reserveKey{}).(bool)
	return v
}
