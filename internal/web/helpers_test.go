package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/session"
)

const testToken = "test-token-0123456789abcdef"

// env is one web server over a real bus and session store, on httptest.
type env struct {
	t     *testing.T
	srv   *Server
	http  *httptest.Server
	bus   *bus.Bus
	store *session.Store
	ws    string
	clock *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newEnv(t *testing.T, mutate ...func(*config.WebChannelConfig, *Deps)) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, bus: bus.New(64), ws: filepath.Join(dir, "ws"),
		clock: &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	if err := os.MkdirAll(e.ws, 0o750); err != nil {
		t.Fatal(err)
	}
	e.store = session.NewStore(filepath.Join(e.ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, zaptest.NewLogger(t))
	t.Cleanup(func() { _ = e.store.Close() })
	cfg := config.WebChannelConfig{Enabled: true, Token: testToken, SessionTTL: time.Hour, MaxUploadBytes: 1 << 20}
	deps := Deps{Bus: e.bus, Sessions: e.store, Workspace: e.ws, StateFile: filepath.Join(dir, "web-conversations.json"),
		TokenFile: filepath.Join(dir, "web-token"), Clock: clock.Func(e.clock.Now)}
	for _, m := range mutate {
		m(&cfg, &deps)
	}
	e.srv = New(cfg, deps, zaptest.NewLogger(t))
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(func() {
		e.srv.CloseStreams()
		e.http.Close()
	})
	return e
}

// client is a logged-in browser: its cookie and CSRF token.
type client struct {
	e      *env
	cookie *http.Cookie
	csrf   string
}

func (e *env) login() *client {
	e.t.Helper()
	resp := e.do(nil, "POST", "/api/login", map[string]string{"token": testToken})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("login: %d %s", resp.StatusCode, body(resp))
	}
	var out struct{ CSRF string }
	decode(e.t, resp, &out)
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			return &client{e: e, cookie: c, csrf: out.CSRF}
		}
	}
	e.t.Fatal("login set no session cookie")
	return nil
}

// do sends a request as c (nil: logged out) with a JSON body (or a
// *multipartBody, or a string sent as is). The body is closed when the
// test ends, so that it can be read after the call.
//
//bodyclose:handled
func (e *env) do(c *client, method, path string, in any, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	ctype := ""
	switch v := in.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(v), "application/json"
	case *multipartBody:
		rd, ctype = &v.buf, v.ctype
	default:
		b, _ := json.Marshal(v)
		rd, ctype = bytes.NewReader(b), "application/json"
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c != nil {
		req.AddCookie(c.cookie)
		req.Header.Set(csrfHeader, c.csrf)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type multipartBody struct {
	buf   bytes.Buffer
	ctype string
}

func newMultipart(t *testing.T, fields map[string]string, files map[string][]byte) *multipartBody {
	t.Helper()
	m := &multipartBody{}
	w := multipart.NewWriter(&m.buf)
	for k, v := range fields {
		_ = w.WriteField(k, v)
	}
	for name, data := range files {
		fw, err := w.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(data)
	}
	_ = w.Close()
	m.ctype = w.FormDataContentType()
	return m
}

func body(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func (c *client) newChat() string {
	c.e.t.Helper()
	resp := c.e.do(c, "POST", "/api/chats", map[string]string{})
	if resp.StatusCode != http.StatusCreated {
		c.e.t.Fatalf("create chat: %d %s", resp.StatusCode, body(resp))
	}
	var conv conversation
	decode(c.e.t, resp, &conv)
	return conv.ID
}

// inbound waits for the next message the page put on the bus.
func (e *env) inbound() bus.InboundMessage {
	e.t.Helper()
	select {
	case m := <-e.bus.Inbound():
		return m
	case <-time.After(10 * time.Second):
		e.t.Fatal("no inbound message")
	}
	return bus.InboundMessage{}
}

// stream opens a conversation's event stream and returns its frames.
func (c *client) stream(id string) (<-chan map[string]any, func()) {
	c.e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", c.e.http.URL+"/api/chats/"+id+"/events", nil)
	req.AddCookie(c.cookie)
	//lint:ignore bodyclose stop, below, closes it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		c.e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		b := body(resp)
		resp.Body.Close()
		c.e.t.Fatalf("events: %d %s", resp.StatusCode, b)
	}
	out := make(chan map[string]any, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				out <- m
			}
		}
	}()
	stop := func() {
		cancel()
		resp.Body.Close()
		<-done
	}
	c.e.t.Cleanup(stop)
	return out, stop
}

func next(t *testing.T, frames <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("stream ended")
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return nil
}
