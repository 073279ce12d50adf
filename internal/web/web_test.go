package web

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestPageHeaders(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/", "/assets/app.js", "/assets/style.css", "/api/chats"} {
		resp := e.do(nil, "GET", path, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: missing nosniff or frame denial", path)
		}
	}
	if resp := e.do(nil, "GET", "/assets/../web.go", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("asset outside static: %d", resp.StatusCode)
	}
	if resp := e.do(nil, "GET", "/assets/app.js", nil); resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("app.js type %q", resp.Header.Get("Content-Type"))
	}
}

func TestPageHasNoInlineScriptOrStyle(t *testing.T) {
	data, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "<style") ||
		strings.Contains(page, "onclick") {
		t.Fatal("index.html has inline script or style, which the CSP forbids")
	}
}

func TestLogin(t *testing.T) {
	tests := []struct {
		name string
		body any
		want int
	}{
		{"wrong token", map[string]string{"token": "nope"}, http.StatusUnauthorized},
		{"empty", map[string]string{}, http.StatusUnauthorized},
		{"malformed JSON", `{"token":`, http.StatusBadRequest},
		{"unknown field", `{"password":"x"}`, http.StatusBadRequest},
		{"right token", map[string]string{"token": testToken}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp := e.do(nil, "POST", "/api/login", tt.body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, body(resp))
			}
		})
	}
	c := newEnv(t).login()
	if !c.cookie.HttpOnly || c.cookie.SameSite != http.SameSiteStrictMode || c.cookie.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure on plain HTTP", c.cookie)
	}
}

func TestLoginCookieSecureBehindTLS(t *testing.T) {
	e := newEnv(t, func(c *config.WebChannelConfig, _ *Deps) { c.PublicURL = "https://bot.example.com" })
	if c := e.login(); !c.cookie.Secure {
		t.Error("cookie not Secure with an https public_url")
	}
}

// Failed logins back off per client; behind a trusted proxy the client is
// the address its forwarding header names. A correct token is compared
// before any limit, so it gets in even from a client that is backing off
// (issue 28, finding 4: before, five wrong guesses from anywhere behind the
// proxy locked the owner out).
func TestLoginFailuresBackOffPerClient(t *testing.T) {
	e := newEnv(t, func(c *config.WebChannelConfig, _ *Deps) { c.TrustedProxies = []string{"127.0.0.1"} })
	login := func(client, token string) int {
		return e.do(nil, "POST", "/api/login", map[string]string{"token": token}, "X-Forwarded-For", client).StatusCode
	}
	const guesser, other = "203.0.113.7", "198.51.100.9"
	for i := range failBurst {
		if s := login(guesser, "wrong"); s != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, s)
		}
	}
	if s := login(guesser, "wrong"); s != http.StatusTooManyRequests {
		t.Fatalf("failure %d: status %d, want 429", failBurst+1, s)
	}
	if s := login(other, "wrong"); s != http.StatusUnauthorized {
		t.Errorf("another client's first failure: %d, want 401 (its own bucket)", s)
	}
	if s := login(guesser, testToken); s != http.StatusOK {
		t.Errorf("right token from the client backing off: %d, want 200", s)
	}
	e.clock.Add(time.Minute)
	if s := login(guesser, "wrong"); s != http.StatusUnauthorized {
		t.Errorf("after a minute: %d, want 401", s)
	}
}

// Without trusted_proxies a forwarding header is anyone's word: rotating
// it does not make a new client.
func TestLoginIgnoresForwardedFromUntrustedPeer(t *testing.T) {
	e := newEnv(t)
	var last int
	for i := range failBurst + 1 {
		last = e.do(nil, "POST", "/api/login", map[string]string{"token": "wrong"},
			"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1)).StatusCode
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("failure %d with rotated X-Forwarded-For: %d, want 429", failBurst+1, last)
	}
}

// Failures from ever new addresses drain the shared bucket and fill the
// per-client map up to its bound, never past it; a correct token still
// gets in.
func TestLoginFailureStateBounded(t *testing.T) {
	const bound = 40
	e := newEnv(t, func(c *config.WebChannelConfig, _ *Deps) { c.TrustedProxies = []string{"127.0.0.0/8"} })
	e.srv.auth.maxFailed = bound
	for round := range 3 {
		for i := range 60 {
			client := fmt.Sprintf("2001:db8:%x:%x::1", round, i)
			if s := e.do(nil, "POST", "/api/login", map[string]string{"token": "wrong"}, "X-Forwarded-For", client).StatusCode; s != http.StatusUnauthorized && s != http.StatusTooManyRequests {
				t.Fatalf("failure from %s: %d", client, s)
			}
		}
		e.srv.auth.mu.Lock()
		n := len(e.srv.auth.failures)
		e.srv.auth.mu.Unlock()
		if n > bound {
			t.Fatalf("round %d: %d clients remembered, bound %d", round, n, bound)
		}
		if s := e.do(nil, "POST", "/api/login", map[string]string{"token": testToken}, "X-Forwarded-For", "192.0.2.1").StatusCode; s != http.StatusOK {
			t.Fatalf("round %d: right token while the shared bucket is drained: %d", round, s)
		}
		e.clock.Add(time.Minute) // buckets refill: the next round may drop them
	}
}

func TestClientAddr(t *testing.T) {
	trusted, err := config.ParseTrustedProxies([]string{"10.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, remote string
		hdr          http.Header
		want         string
	}{
		{"untrusted peer, header ignored", "192.0.2.5:1234", http.Header{"X-Forwarded-For": {"203.0.113.1"}}, "192.0.2.5"},
		{"trusted peer, X-Forwarded-For", "10.1.2.3:1234", http.Header{"X-Forwarded-For": {"203.0.113.1"}}, "203.0.113.1"},
		{"chain: nearest untrusted hop", "10.1.2.3:1234", http.Header{"X-Forwarded-For": {"198.51.100.1, 203.0.113.1, 10.9.9.9"}}, "203.0.113.1"},
		{"spoofed left part not reached", "10.1.2.3:1234", http.Header{"X-Forwarded-For": {"1.1.1.1", "203.0.113.1"}}, "203.0.113.1"},
		{"Forwarded wins", "[::1]:80", http.Header{"Forwarded": {`for="[2001:db8::17]:4711";proto=https`}, "X-Forwarded-For": {"203.0.113.1"}}, "2001:db8::17"},
		{"Forwarded list", "10.0.0.1:80", http.Header{"Forwarded": {"for=198.51.100.1, for=10.0.0.2"}}, "198.51.100.1"},
		{"obfuscated hop: the proxy", "10.0.0.1:80", http.Header{"Forwarded": {"for=_hidden"}}, "10.0.0.1"},
		{"no header: the proxy", "10.0.0.1:80", nil, "10.0.0.1"},
		{"mapped v4 peer", "[::ffff:10.0.0.1]:80", http.Header{"X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: tt.hdr}
			if got := clientAddr(r, trusted).String(); got != tt.want {
				t.Errorf("clientAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLoginWithTokenFile(t *testing.T) {
	var file string
	e := newEnv(t, func(c *config.WebChannelConfig, d *Deps) { c.Token = ""; file = d.TokenFile })
	if s := e.do(nil, "POST", "/api/login", map[string]string{"token": "x"}).StatusCode; s != http.StatusServiceUnavailable {
		t.Fatalf("no token file: %d, want 503", s)
	}
	created, err := EnsureTokenFile(file)
	if err != nil || !created {
		t.Fatalf("EnsureTokenFile = %v, %v", created, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	if again, _ := EnsureTokenFile(file); again {
		t.Fatal("EnsureTokenFile replaced an existing token")
	}
	tok, err := ReadTokenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s := e.do(nil, "POST", "/api/login", map[string]string{"token": tok}).StatusCode; s != http.StatusOK {
		t.Fatalf("token from file: %d", s)
	}
}

func TestOneTimeLink(t *testing.T) {
	e := newEnv(t)
	code := e.srv.IssueLink()
	if s := e.do(nil, "POST", "/api/login", map[string]string{"link": code}).StatusCode; s != http.StatusOK {
		t.Fatalf("link: %d", s)
	}
	if s := e.do(nil, "POST", "/api/login", map[string]string{"link": code}).StatusCode; s != http.StatusUnauthorized {
		t.Fatalf("link used twice: %d", s)
	}
	late := e.srv.IssueLink()
	e.clock.Add(linkTTL + time.Second)
	if s := e.do(nil, "POST", "/api/login", map[string]string{"link": late}).StatusCode; s != http.StatusUnauthorized {
		t.Fatalf("expired link: %d", s)
	}
}

func TestSessionExpires(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	if s := e.do(c, "GET", "/api/chats", nil).StatusCode; s != http.StatusOK {
		t.Fatalf("logged in: %d", s)
	}
	e.clock.Add(2 * time.Hour)
	if s := e.do(c, "GET", "/api/chats", nil).StatusCode; s != http.StatusUnauthorized {
		t.Fatalf("after session_ttl: %d", s)
	}
}

func TestLogout(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	if s := e.do(c, "POST", "/api/logout", nil).StatusCode; s != http.StatusNoContent {
		t.Fatalf("logout: %d", s)
	}
	if s := e.do(c, "GET", "/api/chats", nil).StatusCode; s != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", s)
	}
}

// Every endpoint but login refuses a browser that is not logged in, and
// every state change one without the CSRF token or from another site.
func TestEndpointsRequireLoginAndCSRF(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	endpoints := []struct{ method, path string }{
		{"GET", "/api/session"},
		{"GET", "/api/chats"},
		{"POST", "/api/chats"},
		{"PATCH", "/api/chats/" + id},
		{"DELETE", "/api/chats/" + id},
		{"GET", "/api/chats/" + id + "/events"},
		{"POST", "/api/chats/" + id + "/messages"},
		{"POST", "/api/chats/" + id + "/stop"},
		{"POST", "/api/logout"},
	}
	for _, ep := range endpoints {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			if s := e.do(nil, ep.method, ep.path, map[string]string{}).StatusCode; s != http.StatusUnauthorized {
				t.Errorf("logged out: %d, want 401", s)
			}
			if ep.method == "GET" {
				return
			}
			if s := e.do(c, ep.method, ep.path, map[string]string{}, csrfHeader, "").StatusCode; s != http.StatusForbidden {
				t.Errorf("no CSRF token: %d, want 403", s)
			}
			if s := e.do(c, ep.method, ep.path, map[string]string{}, csrfHeader, "forged").StatusCode; s != http.StatusForbidden {
				t.Errorf("wrong CSRF token: %d, want 403", s)
			}
			if s := e.do(c, ep.method, ep.path, map[string]string{}, "Sec-Fetch-Site", "cross-site").StatusCode; s != http.StatusForbidden {
				t.Errorf("cross-site: %d, want 403", s)
			}
		})
	}
}

func TestEventStreamChecksOrigin(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	tests := []struct {
		name, header, value string
		want                int
	}{
		{"other origin", "Origin", "https://evil.example", http.StatusForbidden},
		{"cross-site fetch", "Sec-Fetch-Site", "cross-site", http.StatusForbidden},
		{"same-site but other origin", "Sec-Fetch-Site", "same-site", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s := e.do(c, "GET", "/api/chats/"+id+"/events", nil, tt.header, tt.value).StatusCode; s != tt.want {
				t.Fatalf("status %d, want %d", s, tt.want)
			}
		})
	}
}

func TestUnknownConversation(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	for _, id := range []string{"nosuchchat", "BAD", "a..b", strings.Repeat("a", 40)} {
		for _, ep := range []struct{ method, path string }{
			{"PATCH", "/api/chats/" + id},
			{"DELETE", "/api/chats/" + id},
			{"GET", "/api/chats/" + id + "/events"},
			{"POST", "/api/chats/" + id + "/messages"},
			{"POST", "/api/chats/" + id + "/stop"},
		} {
			resp := e.do(c, ep.method, ep.path, map[string]string{"title": "x", "text": "x"})
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body(resp), "no such conversation") {
				t.Errorf("%s %s: %d, want 404 no such conversation", ep.method, ep.path, resp.StatusCode)
			}
		}
	}
	if s := e.do(c, "GET", "/api/nothing", nil).StatusCode; s != http.StatusNotFound {
		t.Errorf("unknown endpoint: %d", s)
	}
}

func TestConversations(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	if s := e.do(c, "PATCH", "/api/chats/"+id, map[string]string{"title": "  Trip   to\nRome "}).StatusCode; s != http.StatusNoContent {
		t.Fatalf("rename: %d", s)
	}
	if s := e.do(c, "PATCH", "/api/chats/"+id, map[string]string{"title": " "}).StatusCode; s != http.StatusBadRequest {
		t.Fatalf("empty title: %d", s)
	}
	if s := e.do(c, "PATCH", "/api/chats/"+id, `{"title":`).StatusCode; s != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d", s)
	}
	var list struct{ Chats []conversation }
	decode(t, e.do(c, "GET", "/api/chats", nil), &list)
	if len(list.Chats) != 1 || list.Chats[0].Title != "Trip to Rome" {
		t.Fatalf("chats = %+v", list.Chats)
	}
	// Delete archives the session like /new, then drops it from the list.
	if s := e.do(c, "DELETE", "/api/chats/"+id, nil).StatusCode; s != http.StatusNoContent {
		t.Fatalf("delete: %d", s)
	}
	m := e.inbound()
	if m.Content != "/new" || m.Key() != "web:"+id {
		t.Fatalf("delete published %q for %s, want /new for web:%s", m.Content, m.Key(), id)
	}
	decode(t, e.do(c, "GET", "/api/chats", nil), &list)
	if len(list.Chats) != 0 {
		t.Fatalf("after delete: %+v", list.Chats)
	}
	// The list survives a restart (a new server on the same state file).
	id2 := c.newChat()
	again := New(e.srv.cfg, e.srv.deps, e.srv.log)
	if _, ok, err := again.convs.get(id2); !ok || err != nil {
		t.Fatalf("conversation %s lost on restart: %v", id2, err)
	}
}

func TestSendAndStop(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	resp := e.do(c, "POST", "/api/chats/"+id+"/messages", map[string]string{"id": "m1", "text": "hello there"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("send: %d %s", resp.StatusCode, body(resp))
	}
	m := e.inbound()
	if m.Channel != "web" || m.ChatID != id || m.Key() != "web:"+id || m.Content != "hello there" || m.MessageID != "m1" {
		t.Fatalf("inbound = %+v", m)
	}
	var list struct{ Chats []conversation }
	decode(t, e.do(c, "GET", "/api/chats", nil), &list)
	if list.Chats[0].Title != "hello there" {
		t.Errorf("first message did not name the chat: %q", list.Chats[0].Title)
	}
	if s := e.do(c, "POST", "/api/chats/"+id+"/messages", map[string]string{"text": "  "}).StatusCode; s != http.StatusBadRequest {
		t.Errorf("empty message: %d", s)
	}
	if s := e.do(c, "POST", "/api/chats/"+id+"/messages", `{"text": 1}`).StatusCode; s != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d", s)
	}
	if s := e.do(c, "POST", "/api/chats/"+id+"/stop", nil).StatusCode; s != http.StatusAccepted {
		t.Fatalf("stop: %d", s)
	}
	if m := e.inbound(); m.Content != "/stop" || m.Key() != "web:"+id {
		t.Fatalf("stop published %q for %s", m.Content, m.Key())
	}
}

var png1x1 = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func TestUploads(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	mp := newMultipart(t, map[string]string{"id": "u1", "text": "look"},
		map[string][]byte{"cat.png": png1x1, "../../notes.txt": []byte("some notes")})
	resp := e.do(c, "POST", "/api/chats/"+id+"/messages", mp)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %d %s", resp.StatusCode, body(resp))
	}
	m := e.inbound()
	var img, file *llm.Part
	for i := range m.Media {
		switch m.Media[i].Kind {
		case llm.PartImage:
			img = &m.Media[i]
		case llm.PartFileRef:
			file = &m.Media[i]
		}
	}
	if img == nil || img.Image.MIME != "image/png" || !bytes.Equal(img.Image.Data, png1x1) {
		t.Fatalf("picture not an image part: %+v", m.Media)
	}
	if file == nil || !strings.HasPrefix(file.File.Path, "inbox/web-") || !strings.HasSuffix(file.File.Path, "notes.txt") {
		t.Fatalf("file not a file_ref in inbox/: %+v", m.Media)
	}
	got, err := os.ReadFile(filepath.Join(e.ws, file.File.Path))
	if err != nil || string(got) != "some notes" {
		t.Fatalf("saved file = %q, %v", got, err)
	}
}

func TestUploadTooLarge(t *testing.T) {
	e := newEnv(t, func(c *config.WebChannelConfig, _ *Deps) { c.MaxUploadBytes = 1000 })
	c := e.login()
	id := c.newChat()
	mp := newMultipart(t, map[string]string{"text": "big"}, map[string][]byte{"big.bin": bytes.Repeat([]byte("x"), 5000)})
	resp := e.do(c, "POST", "/api/chats/"+id+"/messages", mp)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if b := body(resp); !strings.Contains(b, "upload too large") || !strings.Contains(b, "max_upload_bytes") {
		t.Fatalf("413 message %q does not say what the limit is", b)
	}
	// Far over the limit: the body is cut off while reading.
	mp = newMultipart(t, map[string]string{"text": "huge"}, map[string][]byte{"huge.bin": bytes.Repeat([]byte("x"), 3<<20)})
	if s := e.do(c, "POST", "/api/chats/"+id+"/messages", mp).StatusCode; s != http.StatusRequestEntityTooLarge {
		t.Fatalf("huge upload: %d, want 413", s)
	}
	if s := e.do(c, "POST", "/api/chats/"+id+"/messages", "garbage", "Content-Type", "multipart/form-data; boundary=x").StatusCode; s != http.StatusBadRequest {
		t.Fatalf("malformed multipart: %d, want 400", s)
	}
}

// The stream starts with the stored conversation, follows the turn, and a
// page that reconnects mid-turn or after the answer was stored sees the
// answer exactly once.
func TestEventStream(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	k := "web:" + id
	user := llm.NewText(llm.RoleUser, "[Mon 2026-01-02 03:04 UTC · web · chat "+id+"]\nhi")
	user.Meta = &llm.Meta{MessageIDs: []string{"m1"}}
	if _, err := e.store.Append(k, user); err != nil {
		t.Fatal(err)
	}
	frames, stop := c.stream(id)
	h := next(t, frames)
	if h["type"] != "hello" || h["n"].(float64) != 1 {
		t.Fatalf("hello = %v", h)
	}
	msgs := h["messages"].([]any)
	if u := msgs[0].(map[string]any); u["text"] != "hi" || u["ids"].([]any)[0] != "m1" {
		t.Fatalf("user message = %v (prefix not stripped or ids missing)", u)
	}
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindStart, TurnID: "t1"})
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindStatus, TurnID: "t1", Content: "reading notes.md"})
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindDraft, TurnID: "t1", Content: "Hel"})
	for _, want := range []string{"start", "status", "draft"} {
		if f := next(t, frames); f["type"] != want {
			t.Fatalf("event %v, want %s", f, want)
		}
	}
	// A second page connecting mid-turn sees the draft in its hello.
	frames2, stop2 := c.stream(id)
	h2 := next(t, frames2)
	if h2["turn"] != "t1" || !strings.Contains(h2["draft"].(string), "Hel") || h2["status"] != "reading notes.md" {
		t.Fatalf("mid-turn hello = %v", h2)
	}
	stop2()
	// The answer is stored, then its final published.
	if _, err := e.store.Append(k, llm.NewText(llm.RoleAssistant, "Hello **you**")); err != nil {
		t.Fatal(err)
	}
	// A page reconnecting between the two has the answer in its hello and
	// no draft: it must not show it twice.
	frames3, _ := c.stream(id)
	h3 := next(t, frames3)
	if h3["n"].(float64) != 2 || h3["turn"] != nil {
		t.Fatalf("hello after the answer was stored = %v", h3)
	}
	e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindFinal, TurnID: "t1", Content: "Hello **you**"})
	f := next(t, frames)
	if f["type"] != "final" || f["n"].(float64) != 2 || !strings.Contains(f["html"].(string), "<strong>you</strong>") {
		t.Fatalf("final = %v", f)
	}
	if f3 := next(t, frames3); f3["n"].(float64) > h3["n"].(float64) {
		t.Fatalf("final n %v > hello n %v: the page would show the answer twice", f3["n"], h3["n"])
	}
	stop()
}

func TestModelOutputIsInert(t *testing.T) {
	out := renderMarkdown("<script>alert(1)</script>\n\n[click](javascript:alert(1)) <img src=x onerror=alert(1)>\n\n" +
		"| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\nfmt.Println(\"<b>\")\n```\n[ok](https://example.com)")
	for _, bad := range []string{"<script", "javascript:", "onerror", "<img"} {
		if strings.Contains(out, bad) {
			t.Errorf("rendered output contains %q:\n%s", bad, out)
		}
	}
	for _, good := range []string{"<table>", "<pre><code class=\"language-go\">", "&lt;b&gt;", `href="https://example.com"`} {
		if !strings.Contains(out, good) {
			t.Errorf("rendered output lacks %q:\n%s", good, out)
		}
	}
}

// A slow page is cut off instead of holding up the others or the channel
// manager; its EventSource reconnects and catches up.
func TestSlowPageIsDisconnected(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	sub, _, err := e.srv.hub.subscribe(id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range streamBuffer + 1 {
		e.srv.Receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: bus.KindDraft, TurnID: "t", Content: fmt.Sprint(i)})
	}
	n := 0
	for range sub.ch {
		n++
	}
	if n != streamBuffer {
		t.Fatalf("slow page got %d frames before being cut off, want %d", n, streamBuffer)
	}
}

func TestCloseStreamsEndsStreams(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	frames, _ := c.stream(id)
	next(t, frames)
	e.srv.CloseStreams()
	for range frames {
	}
	if s := e.do(c, "GET", "/api/chats/"+id+"/events", nil).StatusCode; s != http.StatusServiceUnavailable {
		t.Fatalf("stream after close: %d, want 503", s)
	}
}

func TestConcurrentSendsAllArrive(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e.do(c, "POST", "/api/chats/"+id+"/messages", map[string]string{"id": fmt.Sprint("c", i), "text": "x"})
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for range n {
		seen[e.inbound().MessageID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct messages, want %d", len(seen), n)
	}
}

func TestStaticGzipAndRevalidation(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest("GET", e.http.URL+"/assets/app.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("ETag") == "" {
		t.Fatalf("headers %v", resp.Header)
	}
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d, want 304", resp.StatusCode)
	}
}

// Pages coming and going while turns start and end are always subscribed
// to the state the hub delivers to, never to one it just dropped.
func TestHubSubscribeRacesWithForget(t *testing.T) {
	e := newEnv(t)
	c := e.login()
	id := c.newChat()
	h := e.srv.hub
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			kind := bus.KindStart
			if i%2 == 1 {
				kind = bus.KindFinal
			}
			h.receive(bus.OutboundMessage{Channel: "web", ChatID: id, Kind: kind, TurnID: "t"})
		}
	})
	// live reports whether sub is in the hub's current state for id (or
	// was cut off as too slow, which is not what this test is about).
	live := func(sub *subscriber) bool {
		h.mu.Lock()
		st := h.chats[id]
		h.mu.Unlock()
		if st != nil {
			st.mu.Lock()
			_, ok := st.subs[sub]
			st.mu.Unlock()
			if ok {
				return true
			}
		}
		for {
			select {
			case _, open := <-sub.ch:
				if !open {
					return true
				}
			default:
				return false
			}
		}
	}
	var pages sync.WaitGroup
	for range 4 {
		pages.Go(func() {
			for range 500 {
				sub, _, err := h.subscribe(id)
				if err != nil {
					t.Error(err)
					return
				}
				if !live(sub) {
					t.Error("a page was subscribed to a dropped state: it would get no events")
					return
				}
				h.unsubscribe(id, sub)
			}
		})
	}
	pages.Wait()
	close(stop)
	churn.Wait()
}

// TestWriteQueuedDrainsInOrder: the stream writes the frames a page fell
// behind on in one go, in order, and stops at a closed channel.
func TestWriteQueuedDrainsInOrder(t *testing.T) {
	tests := []struct {
		name      string
		queued    []string
		close     bool
		wantAlive bool
	}{
		{"nothing queued", nil, false, true},
		{"frames queued", []string{"b", "c"}, false, true},
		{"cut off after queued frames", []string{"b"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := make(chan []byte, 4)
			for _, f := range tt.queued {
				ch <- []byte(f)
			}
			if tt.close {
				close(ch)
			}
			var buf bytes.Buffer
			if alive := writeQueued(&buf, []byte("a"), ch); alive != tt.wantAlive {
				t.Errorf("alive = %v, want %v", alive, tt.wantAlive)
			}
			if want := "a" + strings.Join(tt.queued, ""); buf.String() != want {
				t.Errorf("wrote %q, want %q", buf.String(), want)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"abc123", true},
		{"ABC", false},
	}
	for _, tt := range tests {
		if got := validID(tt.in); got != tt.want {
			t.Errorf("validID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
