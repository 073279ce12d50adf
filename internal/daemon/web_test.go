package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

var loginLink = regexp.MustCompile(`(http://[^\s/]+)/#login=([\w-]+)`)

// /web from the owner's Telegram DM answers with a one-time login link to
// this gateway's page; the link logs a browser in once.
func TestWebCommandGivesOneTimeLink(t *testing.T) {
	g := startWith(t, setup{})
	g.tg.PushMessage(telegramfake.DM(owner, "/web"))
	g.waitPrefix(owner, "Open this link within 10 minutes")
	v := g.tg.Visible(owner)
	m := loginLink.FindStringSubmatch(v[len(v)-1])
	if m == nil || m[1] != g.base {
		t.Fatalf("answer %q has no link to %s", v[len(v)-1], g.base)
	}
	login := func() int {
		resp, err := http.Post(g.base+"/api/login", "application/json", bytes.NewReader([]byte(`{"link":"`+m[2]+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := login(); s != http.StatusOK {
		t.Fatalf("login with the link: %d", s)
	}
	if s := login(); s != http.StatusUnauthorized {
		t.Fatalf("second use of the link: %d, want 401", s)
	}
	if n := len(g.script.Requests()); n != 0 {
		t.Fatalf("/web called the model %d times", n)
	}

	// In a group the link would let the group in: refused.
	g.tg.PushMessage(telegramfake.Mention(-42, owner, "/web"))
	g.waitPrefix(-42, "For safety I send login links only in a direct message")
	if strings.Contains(strings.Join(g.tg.Visible(-42), "\n"), "#login=") {
		t.Fatal("a login link was posted in a group")
	}
}

// Only senders let in by name get a link: "*" (everyone) is not enough.
func TestWebLinksAllowed(t *testing.T) {
	cfg := &config.Config{}
	telegram.Of(cfg).AllowFrom = []string{"100"}
	discord.Of(cfg).AllowFrom = []string{"*"}
	pairing := channels.NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	code, err := pairing.Request("discord", "7", "", "7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pairing.Approve(code); err != nil {
		t.Fatal(err)
	}
	l := &webLinks{cfg: cfg, pairing: pairing}
	tests := []struct {
		channel, sender string
		want            bool
	}{
		{"telegram", "100", true},
		{"telegram", "101", false},
		{"discord", "5", false}, // allowed only through "*"
		{"discord", "7", true},  // approved by pairing
		{"cli", "local", false},
	}
	for _, tt := range tests {
		if got := l.allowed(bus.InboundMessage{Channel: tt.channel, SenderID: tt.sender}); got != tt.want {
			t.Errorf("%s:%s allowed = %v, want %v", tt.channel, tt.sender, got, tt.want)
		}
	}
}

// A conversation of the page can schedule a reminder like a chat app can:
// the job belongs to web:<id>.
func TestWebConversationSchedulesJobs(t *testing.T) {
	g := startWith(t, setup{})
	c := newWebClient(t, g)
	var chat struct{ ID string }
	c.call("POST", "/api/chats", `{}`, &chat)
	g.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "cron", Args: `{"action":"add","every":"24h","message":"Ask about the plants."}`}}},
		fakellm.Reply{Text: "Done: I will ask every day."},
	)
	c.call("POST", "/api/chats/"+chat.ID+"/messages", `{"text":"ask me about the plants every day"}`, nil)
	g.waitUntil("the job in jobs.json", func() bool {
		data, _ := os.ReadFile(filepath.Join(g.home, CronJobsFile))
		return strings.Contains(string(data), `"session_key": "web:`+chat.ID+`"`) || strings.Contains(string(data), `"chat_id": "`+chat.ID+`"`)
	})
	g.waitUntil("the answer stored", func() bool {
		msgs := g.sessionMessages("web:" + chat.ID)
		return len(msgs) > 0 && strings.Contains(msgs[len(msgs)-1].Parts[0].Text, "every day")
	})
}

// webClient is a logged-in client of the gateway's web API.
type webClient struct {
	t            *testing.T
	g            *gw
	cookie, csrf string
}

func newWebClient(t *testing.T, g *gw) *webClient {
	t.Helper()
	c := &webClient{t: t, g: g}
	resp, err := http.Post(g.base+"/api/login", "application/json", strings.NewReader(`{"token":"`+webToken(g)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ CSRF string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %v", resp.StatusCode, err)
	}
	for _, ck := range resp.Cookies() {
		c.cookie = ck.Name + "=" + ck.Value
	}
	c.csrf = out.CSRF
	return c
}

func (c *webClient) call(method, path, body string, out any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.g.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", c.cookie)
	req.Header.Set("X-CSRF-Token", c.csrf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		c.t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			c.t.Fatal(err)
		}
	}
}

// webHello is the first frame of a conversation's event stream.
type webHello struct {
	N        int
	Messages []struct {
		Role, Text, HTML string
		Files            []struct{ Name, URL string }
	}
}

// hello opens conversation id's event stream, reads its hello frame and
// closes the stream.
func (c *webClient) hello(id string) webHello {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.g.base+"/api/chats/"+id+"/events", nil)
	req.Header.Set("Cookie", c.cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("events: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var h webHello
		if err := json.Unmarshal([]byte(data), &h); err != nil {
			c.t.Fatalf("hello: %v", err)
		}
		return h
	}
	c.t.Fatalf("event stream ended without a hello: %v", sc.Err())
	return webHello{}
}
