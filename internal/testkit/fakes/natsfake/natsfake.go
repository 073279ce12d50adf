// Package natsfake runs a real NATS server with JetStream in-process for
// tests and bench/cmd/nanobot-bench: file storage in a temporary directory, a
// random loopback port, and a Restart that keeps both (a NATS restart with
// its data intact). It is the server itself (nats-server/v2), not an
// imitation; nothing but tests and the bench may link it.
package natsfake

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
)

// Server is an embedded NATS server.
type Server struct {
	t    fakes.TB
	dir  string
	port int

	mu  sync.Mutex
	srv *server.Server
}

// Start starts a server with JetStream storing under dir (a test's
// t.TempDir()); it is shut down at the test's cleanup.
func Start(t fakes.TB, dir string) *Server {
	t.Helper()
	s := &Server{t: t, dir: dir, port: -1}
	if err := s.start(); err != nil {
		t.Fatalf("natsfake: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() error {
	srv, err := server.NewServer(&server.Options{
		ServerName: "natsfake",
		Host:       "127.0.0.1",
		Port:       s.port,
		JetStream:  true,
		StoreDir:   s.dir,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("server not ready on port %d", s.port)
	}
	s.port = srv.Addr().(*net.TCPAddr).Port
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// URL is the client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Shutdown stops the server; clients reconnect once Restart brings it back.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server and starts it again on the same port with the
// same store: streams, consumers and their acknowledgements survive.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	if err := s.start(); err != nil {
		s.t.Fatalf("natsfake: restart: %v", err)
	}
}
