package discordfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is a bare gateway client speaking the protocol by hand.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, s *Server, path string) *client {
	t.Helper()
	url := "ws" + strings.TrimPrefix(s.URL(), "http") + path + "?v=10&encoding=json"
	ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	resp.Body.Close() // the handshake's, empty
	t.Cleanup(func() { _ = ws.Close() })
	c := &client{t: t, ws: ws}
	if p := c.read(); p.Op != opHello {
		t.Fatalf("first frame op %d, want HELLO", p.Op)
	}
	return c
}

func (c *client) write(op int, d any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatalf("write op %d: %v", op, err)
	}
}

type frameIn struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func (c *client) read() frameIn {
	c.t.Helper()
	p, err := c.tryRead()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return p
}

func (c *client) tryRead() (frameIn, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var p frameIn
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(data, &p)
}

func (c *client) readDispatch(t string) frameIn {
	c.t.Helper()
	for {
		p := c.read()
		if p.Op == opDispatch && p.T != nil && *p.T == t {
			return p
		}
	}
}

func (c *client) identify(token string, intents int) (sessionID string) {
	c.t.Helper()
	c.write(opIdentify, map[string]any{"token": token, "intents": intents, "properties": map[string]string{"os": "linux"}})
	p := c.readDispatch("READY")
	var ready struct {
		SessionID string `json:"session_id"`
		ResumeURL string `json:"resume_gateway_url"`
		User      User   `json:"user"`
	}
	if err := json.Unmarshal(p.D, &ready); err != nil || ready.SessionID == "" || ready.ResumeURL == "" || !ready.User.Bot {
		c.t.Fatalf("READY = %s (%v)", p.D, err)
	}
	return ready.SessionID
}

func (c *client) closeCode() int {
	c.t.Helper()
	for {
		_, err := c.tryRead()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			c.t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

const allIntents = IntentGuilds | IntentGuildMessages | IntentDirectMessages | IntentMessageContent

func TestIdentifyHeartbeatAndDispatch(t *testing.T) {
	s := New(t, Options{})
	g := s.AddGuild("g")
	ch := s.AddTextChannel(g, "general")
	c := dial(t, s, "/gateway")
	c.identify("Bot "+s.Token(), allIntents)
	if p := c.readDispatch("GUILD_CREATE"); !bytes.Contains(p.D, []byte(ch)) {
		t.Errorf("GUILD_CREATE lacks the channel: %s", p.D)
	}
	c.write(opHeartbeat, 2)
	if p := c.read(); p.Op != opHeartbeatACK {
		t.Fatalf("heartbeat answered with op %d", p.Op)
	}
	u := s.NewUser("alice")
	id := s.SendMessageCreate(Incoming{ChannelID: ch, Author: u, Content: "hi <@" + s.Bot().ID + ">"})
	p := c.readDispatch("MESSAGE_CREATE")
	var m MessageObject
	if err := json.Unmarshal(p.D, &m); err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.Content == "" || len(m.Mentions) != 1 || m.Mentions[0].ID != s.Bot().ID || m.Member == nil {
		t.Errorf("MESSAGE_CREATE = %+v", m)
	}
}

// A forward carries its source in message_snapshots; an edit and a link
// preview are MESSAGE_UPDATEs, told apart by edited_timestamp.
func TestForwardEditAndLinkPreview(t *testing.T) {
	s := New(t, Options{})
	g := s.AddGuild("g")
	ch := s.AddTextChannel(g, "general")
	c := dial(t, s, "/gateway")
	c.identify(s.Token(), allIntents)
	u := s.NewUser("alice")
	src := s.SendMessageCreate(Incoming{ChannelID: ch, Author: u, Content: "the plan"})
	c.readDispatch("MESSAGE_CREATE")
	s.SendMessageCreate(Incoming{ChannelID: ch, Author: u, Forward: src})
	var fwd MessageObject
	_ = json.Unmarshal(c.readDispatch("MESSAGE_CREATE").D, &fwd)
	if fwd.Content != "" || fwd.MessageReference == nil || fwd.MessageReference.Type != ReferenceForward ||
		len(fwd.MessageSnapshots) != 1 || fwd.MessageSnapshots[0].Message.Content != "the plan" {
		t.Fatalf("forward = %+v", fwd)
	}
	s.AddLinkPreview(src, Embed{Type: "link", URL: "https://example.com"})
	s.SendMessageUpdate(src, "the new plan")
	var preview, edit MessageObject
	_ = json.Unmarshal(c.readDispatch("MESSAGE_UPDATE").D, &preview)
	_ = json.Unmarshal(c.readDispatch("MESSAGE_UPDATE").D, &edit)
	if preview.EditedTimestamp != nil || len(preview.Embeds) != 1 {
		t.Errorf("link preview update = %+v", preview)
	}
	if edit.EditedTimestamp == nil || edit.Content != "the new plan" || edit.ID != src {
		t.Errorf("edit = %+v", edit)
	}
}

func TestIdentifyRefused(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		token   string
		intents any
		want    int
	}{
		{"bad token", Options{}, "nope", allIntents, CloseAuthenticationFailed},
		{"no intents", Options{}, Token, nil, CloseInvalidIntents},
		{"unknown intent bits", Options{}, Token, 1 << 30, CloseInvalidIntents},
		{"message content switched off", Options{DisallowMessageContent: true}, Token, allIntents, CloseDisallowedIntents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, tt.opts)
			c := dial(t, s, "/gateway")
			c.write(opIdentify, map[string]any{"token": tt.token, "intents": tt.intents})
			if got := c.closeCode(); got != tt.want {
				t.Errorf("close code %d, want %d", got, tt.want)
			}
		})
	}
}

func TestContentBlankedWithoutIntent(t *testing.T) {
	s := New(t, Options{})
	g := s.AddGuild("g")
	ch := s.AddTextChannel(g, "general")
	c := dial(t, s, "/gateway")
	c.identify(s.Token(), IntentGuilds|IntentGuildMessages)
	s.SendMessageCreate(Incoming{ChannelID: ch, Author: s.NewUser("bob"), Content: "secret"})
	var m MessageObject
	_ = json.Unmarshal(c.readDispatch("MESSAGE_CREATE").D, &m)
	if m.Content != "" {
		t.Errorf("content %q delivered without MESSAGE_CONTENT", m.Content)
	}
}

func TestResumeReplaysMissedEvents(t *testing.T) {
	s := New(t, Options{})
	u := s.NewUser("alice")
	dm := s.AddDM(u)
	c := dial(t, s, "/gateway")
	sid := c.identify(s.Token(), allIntents)
	first := s.SendMessageCreate(Incoming{ChannelID: dm, Author: u, Content: "one"})
	p := c.readDispatch("MESSAGE_CREATE")
	seq := *p.S

	s.DropConnections()
	// gorilla reports a missing close frame as code 1006.
	var ce *websocket.CloseError
	if _, err := c.tryRead(); !errors.As(err, &ce) || ce.Code != websocket.CloseAbnormalClosure {
		t.Fatalf("read after DropConnections: %v, want abnormal closure", err)
	}
	missed := s.SendMessageCreate(Incoming{ChannelID: dm, Author: u, Content: "two"})

	c2 := dial(t, s, "/resume")
	c2.write(opResume, map[string]any{"token": s.Token(), "session_id": sid, "seq": seq})
	var got []string
	for {
		p := c2.read()
		if p.T != nil && *p.T == "RESUMED" {
			break
		}
		var m MessageObject
		_ = json.Unmarshal(p.D, &m)
		got = append(got, m.ID)
	}
	if len(got) != 1 || got[0] != missed || got[0] == first {
		t.Errorf("replayed %v, want only %s", got, missed)
	}
	if st := s.Stats(); st.Resumes != 1 || st.Live != 1 {
		t.Errorf("stats %+v", st)
	}

	// A session closed with 1000 cannot be resumed.
	_ = c2.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	s.WaitFor(t, "client close", func() bool { return len(s.Stats().CloseCodes) == 1 })
	c3 := dial(t, s, "/gateway")
	c3.write(opResume, map[string]any{"token": s.Token(), "session_id": sid, "seq": seq})
	if p := c3.read(); p.Op != opInvalidSession || string(p.D) != "false" {
		t.Errorf("resume of a closed session answered %d %s", p.Op, p.D)
	}
	c3.identify(s.Token(), allIntents) // allowed on the same connection after op 9
}

func TestReconnectAndInvalidSession(t *testing.T) {
	s := New(t, Options{})
	c := dial(t, s, "/gateway")
	c.identify(s.Token(), allIntents)
	s.Reconnect()
	if p := c.read(); p.Op != opReconnect {
		t.Fatalf("got op %d, want RECONNECT", p.Op)
	}
	s.InvalidateSessions(false)
	if p := c.read(); p.Op != opInvalidSession || string(p.D) != "false" {
		t.Fatalf("got op %d %s, want INVALID_SESSION false", p.Op, p.D)
	}
	c.identify(s.Token(), allIntents)
	s.CloseConnections(CloseUnknownError, "Unknown error.")
	if got := c.closeCode(); got != CloseUnknownError {
		t.Errorf("close code %d", got)
	}
}

// do sends a request and returns the response with its body, read and
// closed.
//
//bodyclose:handled
func do(t *testing.T, s *Server, method, path, contentType string, body io.Reader, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL()+path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth {
		req.Header.Set("Authorization", "Bot "+s.Token())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func TestCreateMessageValidation(t *testing.T) {
	s := New(t, Options{})
	u := s.NewUser("alice")
	dm := s.AddDM(u)
	asked := s.SendMessageCreate(Incoming{ChannelID: dm, Author: u, Content: "q"})
	path := "/api/v10/channels/" + dm + "/messages"
	tests := []struct {
		name       string
		body       string
		auth       bool
		wantStatus int
		wantInBody string
	}{
		{"unauthorized", `{"content":"x"}`, false, 401, `"401: Unauthorized"`},
		{"empty", `{"content":""}`, true, 400, `"code":50006`},
		{"too long", `{"content":"` + strings.Repeat("é", 2001) + `"}`, true, 400, `BASE_TYPE_MAX_LENGTH`},
		{"exactly 2000 runes", `{"content":"` + strings.Repeat("é", 2000) + `"}`, true, 200, `"content"`},
		{"unknown reference", `{"content":"x","message_reference":{"message_id":"1"}}`, true, 400, `MESSAGE_REFERENCE_UNKNOWN_MESSAGE`},
		{"reply", `{"content":"x","message_reference":{"message_id":"` + asked + `"},"allowed_mentions":{"parse":[]}}`, true, 200, `"type":19`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, s, "POST", path, "application/json", strings.NewReader(tt.body), tt.auth)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantInBody) {
				t.Errorf("status %d body %s; want %d containing %s", resp.StatusCode, body, tt.wantStatus, tt.wantInBody)
			}
		})
	}
	msgs := s.Messages(dm)
	if len(msgs) != 2 || msgs[1].Reference == nil || msgs[1].AllowedMentions == nil {
		t.Fatalf("stored %+v", msgs)
	}
	if got := msgs[1].Pings; len(got) != 0 {
		t.Errorf("reply with parse:[] and replied_user false pinged %v", got)
	}
}

func TestRateLimitInjection(t *testing.T) {
	s := New(t, Options{})
	dm := s.AddDM(s.NewUser("alice"))
	s.Fail(RouteCreateMessage, Failure{Status: 429, RetryAfter: 1.5, Global: true})
	path := "/api/v10/channels/" + dm + "/messages"
	resp, body := do(t, s, "POST", path, "application/json", strings.NewReader(`{"content":"x"}`), true)
	var rl rateLimitBody
	_ = json.Unmarshal(body, &rl)
	if resp.StatusCode != 429 || rl.RetryAfter != 1.5 || !rl.Global || resp.Header.Get("Retry-After") != "2" ||
		resp.Header.Get("X-RateLimit-Global") != "true" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("429 = %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := do(t, s, "POST", path, "application/json", strings.NewReader(`{"content":"x"}`), true); resp.StatusCode != 200 {
		t.Errorf("second call status %d, the failure should be used up", resp.StatusCode)
	}
	if n := len(s.Messages(dm)); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

func TestDropAfterApply(t *testing.T) {
	s := New(t, Options{})
	dm := s.AddDM(s.NewUser("alice"))
	s.Fail(RouteCreateMessage, Failure{Drop: true})
	req, _ := http.NewRequest("POST", s.URL()+"/api/v10/channels/"+dm+"/messages", strings.NewReader(`{"content":"x"}`))
	req.Header.Set("Authorization", "Bot "+s.Token())
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("dropped request got an answer")
	}
	if n := len(s.Messages(dm)); n != 1 {
		t.Errorf("dropped request stored %d messages, want 1 (it was applied)", n)
	}
}

func TestMultipartUpload(t *testing.T) {
	s := New(t, Options{})
	dm := s.AddDM(s.NewUser("alice"))
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pj, _ := mw.CreateFormField("payload_json")
	_, _ = pj.Write([]byte(`{"content":"see file","allowed_mentions":{"parse":[]}}`))
	fw, _ := mw.CreateFormFile("files[0]", "a.txt")
	_, _ = fw.Write([]byte("hello"))
	_ = mw.Close()
	resp, body := do(t, s, "POST", "/api/v10/channels/"+dm+"/messages", mw.FormDataContentType(), &buf, true)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	m := s.Messages(dm)[0]
	if len(m.Files) != 1 || string(m.Files[0].Data) != "hello" || m.AllowedMentions == nil {
		t.Errorf("stored %+v", m)
	}
	if reqs := s.Requests(); !bytes.Contains(reqs[len(reqs)-1].Body, []byte("allowed_mentions")) {
		t.Errorf("recorded body %s, want the payload_json", reqs[len(reqs)-1].Body)
	}
	var obj MessageObject
	_ = json.Unmarshal(body, &obj)
	resp, data := do(t, s, "GET", strings.TrimPrefix(obj.Attachments[0].URL, s.URL()), "", nil, false)
	if resp.StatusCode != 200 || string(data) != "hello" {
		t.Errorf("attachment download %d %q", resp.StatusCode, data)
	}
}

func TestPings(t *testing.T) {
	bob := User{ID: "2"}
	m := MessageObject{Content: "@everyone <@2> <@&9>", Mentions: []User{bob}, MentionRoles: []string{"9"}}
	tests := []struct {
		name string
		am   *AllowedMentions
		want string
	}{
		{"no allowed_mentions: everything", nil, "2 role:9 @everyone"},
		{"parse nothing", &AllowedMentions{Parse: []string{}}, ""},
		{"users only", &AllowedMentions{Parse: []string{"users"}}, "2"},
	}
	for _, tt := range tests {
		if got := strings.Join(pings(m, tt.am), " "); got != tt.want {
			t.Errorf("%s: pings %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestListMessages(t *testing.T) {
	s := New(t, Options{})
	g := s.AddGuild("g")
	ch := s.AddTextChannel(g, "general")
	u := s.NewUser("carol")
	s.AddMember(g, u)
	var ids []string
	for _, text := range []string{"a", "b", "c", "d"} {
		ids = append(ids, s.SendMessageCreate(Incoming{ChannelID: ch, Author: u, Content: text}))
	}
	hidden := s.AddTextChannel(g, "secret")
	s.DenyHistory(hidden)
	path := "/api/v10/channels/" + ch + "/messages"
	tests := []struct {
		name       string
		path       string
		wantStatus int
		want       string // contents in the order sent, or the error body's part
	}{
		{"after the first, newest first", path + "?after=" + ids[0], 200, "d,c,b"},
		{"limit takes the oldest after the id", path + "?after=" + ids[0] + "&limit=2", 200, "c,b"},
		{"after the last: empty", path + "?after=" + ids[3], 200, ""},
		{"no after: from the start", path + "?limit=100", 200, "d,c,b,a"},
		{"limit out of range", path + "?limit=101", 400, "50035"},
		{"unknown channel", "/api/v10/channels/1/messages", 404, "Unknown Channel"},
		{"no Read Message History", "/api/v10/channels/" + hidden + "/messages", 403, "Missing Access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, s, "GET", tt.path, "", nil, true)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d body %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				if !strings.Contains(string(body), tt.want) {
					t.Errorf("body %s lacks %s", body, tt.want)
				}
				return
			}
			var page []map[string]any
			if err := json.Unmarshal(body, &page); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range page {
				got = append(got, m["content"].(string))
				if _, ok := m["guild_id"]; ok {
					t.Errorf("REST message carries guild_id: %v", m)
				}
				if _, ok := m["member"]; ok {
					t.Errorf("REST message carries member: %v", m)
				}
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("got %q, want %s", got, tt.want)
			}
		})
	}
}
