package fakes

import (
	"io"
	"net"
	"strings"
	"sync"
)

// Outage is a TCP proxy in front of a fake server that can go away (new
// connections refused, open ones cut) and come back on the same address,
// as a platform does in a network blip.
type Outage struct {
	t      TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewOutage starts a proxy to the server at targetURL (http://host:port);
// Down is called when the test ends.
func NewOutage(t TB, targetURL string) *Outage {
	t.Helper()
	target := strings.TrimPrefix(targetURL, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("outage: listen: %v", err)
	}
	o := &Outage{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	o.serve(ln)
	t.Cleanup(o.Down)
	return o
}

// URL is the proxy's base URL, to use instead of the target's.
func (o *Outage) URL() string { return "http://" + o.addr }

func (o *Outage) serve(ln net.Listener) {
	o.mu.Lock()
	o.ln = ln
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.pipe(c)
		}
	}()
}

func (o *Outage) pipe(c net.Conn) {
	up, err := net.Dial("tcp", o.target)
	if err != nil {
		_ = c.Close()
		return
	}
	o.mu.Lock()
	o.conns[c], o.conns[up] = struct{}{}, struct{}{}
	o.mu.Unlock()
	o.wg.Add(2)
	copyAndClose := func(dst, src net.Conn) {
		defer o.wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go copyAndClose(up, c)
	go copyAndClose(c, up)
}

// Down refuses new connections and cuts the open ones.
func (o *Outage) Down() {
	o.mu.Lock()
	if o.ln != nil {
		_ = o.ln.Close()
		o.ln = nil
	}
	for c := range o.conns {
		_ = c.Close()
		delete(o.conns, c)
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// Up listens on the same address again.
func (o *Outage) Up() {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		o.t.Fatalf("outage: listen again on %s: %v", o.addr, err)
	}
	o.serve(ln)
}
