// Package dendrite runs a real Matrix homeserver, Dendrite (Apache-2.0,
// github.com/matrix-org/dendrite), for the Matrix channel's tests: a
// throwaway configuration in a temporary directory (SQLite, an in-memory
// JetStream, federation off, a fresh signing key, shared-secret
// registration), 127.0.0.1 on a free port, stopped at the test's cleanup.
// It is the server nobody here wrote, not an imitation; users are made
// through its shared-secret admin API as an operator would make them.
//
// The binary comes from $NANOBOT_DENDRITE, then PATH, then where go
// install puts it ($(go env GOBIN), or $(go env GOPATH)/bin); scripts/test installs it there when it is missing
// (InstallCommand). Nothing but tests may import this package.
package dendrite

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the Dendrite release the tests are written against.
const Version = "v0.13.8"

// InstallCommand builds the binary from the Go module proxy (about four
// minutes of CPU on a cold cache).
const InstallCommand = "go install github.com/matrix-org/dendrite/cmd/dendrite@" + Version

// Binary finds the dendrite binary: $NANOBOT_DENDRITE, then PATH, then
// $(go env GOPATH)/bin/dendrite. The error says how to install it.
func Binary() (string, error) {
	if p := os.Getenv("NANOBOT_DENDRITE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("NANOBOT_DENDRITE=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("dendrite"); err == nil {
		return p, nil
	}
	// Where go install puts it: GOBIN, else the first GOPATH's bin.
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err == nil {
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n") // GOBIN is often an empty first line
		dirs := []string{lines[0]}
		if len(lines) > 1 {
			for _, p := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
		for _, dir := range dirs {
			if dir == "" {
				continue
			}
			p := filepath.Join(dir, "dendrite")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no dendrite binary ($NANOBOT_DENDRITE, PATH, $(go env GOBIN), $(go env GOPATH)/bin): install it with\n\t%s\n(./scripts/test does this when it is missing)", InstallCommand)
}

// Options tune the server. The zero value is what most tests want.
type Options struct {
	// RateLimit, when > 0, turns the client API's rate limiting on with
	// this many requests before a sender is told M_LIMIT_EXCEEDED, and
	// Cooloff as the retry_after_ms it is told. Off by default, so tests
	// are not slowed by it.
	RateLimit int
	Cooloff   time.Duration
}

// Server is a running Dendrite.
type Server struct {
	// URL is the client-server API's base URL (http://127.0.0.1:port).
	URL string
	// Name is the server name in user ids (@name:Name).
	Name string

	t      testing.TB
	dir    string
	bin    string
	secret string
	port   int
	http   *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a fresh server for the test and stops it at its cleanup. A
// missing binary fails the test with the install command.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("dendrite: %v", err)
	}
	s := &Server{t: t, dir: t.TempDir(), bin: bin, Name: "localhost", http: &http.Client{Timeout: 30 * time.Second}}
	s.secret = randomHex(16)
	if err := s.writeConfig(opts); err != nil {
		t.Fatalf("dendrite: config: %v", err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("dendrite: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) writeConfig(opts Options) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "MATRIX PRIVATE KEY",
		Headers: map[string]string{"Key-ID": "ed25519:test"}, Bytes: key.Seed()})
	if err := os.WriteFile(filepath.Join(s.dir, "matrix_key.pem"), keyPEM, 0o600); err != nil {
		return err
	}
	db := func(name string) string {
		return fmt.Sprintf("    connection_string: file:%s\n", filepath.Join(s.dir, name+".db"))
	}
	rate := "  rate_limiting:\n    enabled: false\n"
	if opts.RateLimit > 0 {
		cool := opts.Cooloff
		if cool <= 0 {
			cool = 500 * time.Millisecond
		}
		rate = fmt.Sprintf("  rate_limiting:\n    enabled: true\n    threshold: %d\n    cooloff_ms: %d\n", opts.RateLimit, cool.Milliseconds())
	}
	cfg := "version: 2\n" +
		"global:\n" +
		"  server_name: " + s.Name + "\n" +
		"  private_key: " + filepath.Join(s.dir, "matrix_key.pem") + "\n" +
		"  disable_federation: true\n" +
		"  trusted_third_party_id_servers: []\n" +
		"  presence: {enable_inbound: false, enable_outbound: false}\n" +
		"  report_stats: {enabled: false}\n" +
		"  jetstream:\n    in_memory: true\n    storage_path: " + s.dir + "\n" +
		"  cache: {max_size_estimated: 64mb, max_age: 1h}\n" +
		"client_api:\n" +
		"  registration_disabled: true\n" +
		"  guests_disabled: true\n" +
		"  registration_shared_secret: " + s.secret + "\n" +
		rate +
		"federation_api:\n  key_perspectives: []\n  database:\n" + db("federationapi") +
		"key_server:\n  database:\n" + db("keyserver") +
		"media_api:\n  base_path: " + filepath.Join(s.dir, "media") + "\n  max_file_size_bytes: 10485760\n  database:\n" + db("mediaapi") +
		"mscs:\n  mscs: []\n  database:\n" + db("mscs") +
		"relay_api:\n  database:\n" + db("relayapi") +
		"room_server:\n  database:\n" + db("roomserver") +
		"sync_api:\n  search: {enabled: false}\n  database:\n" + db("syncapi") +
		"user_api:\n  bcrypt_cost: 4\n  account_database:\n" + db("userapi") +
		"logging:\n  - type: std\n    level: warn\n"
	return os.WriteFile(filepath.Join(s.dir, "dendrite.yaml"), []byte(cfg), 0o600)
}

func (s *Server) start() error {
	if s.port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.port)
	logf, err := os.OpenFile(filepath.Join(s.dir, "dendrite.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--config", filepath.Join(s.dir, "dendrite.yaml"),
		"--http-bind-address", fmt.Sprintf("127.0.0.1:%d", s.port))
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(done); err != nil {
		s.Stop()
		return fmt.Errorf("%w\n%s", err, s.Log())
	}
	return nil
}

// waitReady polls /_matrix/client/versions until the server answers.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("dendrite exited while starting")
		default:
		}
		resp, err := s.http.Get(s.URL + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("dendrite not answering /_matrix/client/versions after 60s")
}

// Stop ends the server (SIGTERM, then SIGKILL after five seconds) and
// waits for it. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Log is what the server wrote so far, for a failing test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "dendrite.log"))
	return string(b)
}

// User is a registered account with a logged-in device.
type User struct {
	ID          string `json:"user_id"`
	AccessToken string `json:"access_token"`
	DeviceID    string `json:"device_id"`
	Password    string `json:"-"`
}

// Register creates the account localpart with password through the
// shared-secret admin API (/_synapse/admin/v1/register, which Dendrite
// serves) and returns it logged in.
func (s *Server) Register(localpart, password string) User {
	s.t.Helper()
	u, err := s.register(localpart, password)
	if err != nil {
		s.t.Fatalf("dendrite: register %s: %v", localpart, err)
	}
	return u
}

func (s *Server) register(localpart, password string) (User, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint := s.URL + "/_synapse/admin/v1/register"
	var n struct {
		Nonce string `json:"nonce"`
	}
	if err := s.call(ctx, http.MethodGet, endpoint, nil, &n); err != nil {
		return User{}, fmt.Errorf("nonce: %w", err)
	}
	mac := hmac.New(sha1.New, []byte(s.secret))
	_, _ = mac.Write([]byte(strings.Join([]string{n.Nonce, localpart, password, "notadmin"}, "\x00")))
	body := map[string]any{"nonce": n.Nonce, "username": localpart, "password": password,
		"admin": false, "mac": hex.EncodeToString(mac.Sum(nil))}
	var u User
	if err := s.call(ctx, http.MethodPost, endpoint, body, &u); err != nil {
		return User{}, err
	}
	if u.ID == "" || u.AccessToken == "" {
		return User{}, fmt.Errorf("answer without user id or token: %+v", u)
	}
	u.Password = password
	return u, nil
}

func (s *Server) call(ctx context.Context, method, url string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
