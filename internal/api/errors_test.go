package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// raw posts body to /v1/chat/completions with token (none when empty) and
// extra header pairs; it returns the status and body.
func (h *harness) raw(token, body string, header ...string) (int, string) {
	h.t.Helper()
	code, _, b := h.do(http.MethodPost, "/v1/chat/completions", token, body, header...)
	return code, b
}

func (h *harness) do(method, path, token, body string, header ...string) (int, http.Header, string) {
	h.t.Helper()
	code, hdr, b, err := h.try(method, path, token, body, header...)
	if err != nil {
		h.t.Fatal(err)
	}
	return code, hdr, b
}

// try is do for goroutines other than the test's: it returns the error.
func (h *harness) try(method, path, token, body string, header ...string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// openAIError is the error shape every refusal must have.
type openAIError struct {
	Error *struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func parseError(t *testing.T, body string) openAIError {
	t.Helper()
	var e openAIError
	var keys map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil {
		t.Fatalf("not an OpenAI error: %s", body)
	}
	_ = json.Unmarshal([]byte(body), &keys)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := keys["error"][k]; !ok {
			t.Errorf("error has no %q field: %s", k, body)
		}
	}
	return e
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	h := newHarness(t)
	msg := func(content string) string {
		return `{"model":"nanobot","messages":[{"role":"user","content":` + content + `}]}`
	}
	cases := []struct {
		name   string
		token  string
		body   string
		status int
		param  string
		says   string
	}{
		{"no key", "", msg(`"hi"`), 401, "", "didn't provide an API key"},
		{"wrong key", "sk-wrong-0123456789abc", msg(`"hi"`), 401, "", "Incorrect API key"},
		{"malformed JSON", webuiToken, `{"model":"nanobot","messages":[`, 400, "", "could not parse the JSON"},
		{"not an object", webuiToken, `[1,2]`, 400, "", "parse"},
		{"trailing data", webuiToken, msg(`"hi"`) + `{}`, 400, "", "after the JSON object"},
		{"unknown field", webuiToken, `{"model":"nanobot","frobnicate":1,"messages":[{"role":"user","content":"hi"}]}`, 400, "frobnicate", "Unrecognized request argument"},
		{"unknown message field", webuiToken, `{"model":"nanobot","messages":[{"role":"user","content":"hi","mood":"sad"}]}`, 400, "mood", "Unrecognized"},
		{"wrong type", webuiToken, `{"model":"nanobot","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, 400, "stream", "Invalid type"},
		{"no model", webuiToken, `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model", "model parameter"},
		{"unknown model", webuiToken, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "model", "does not exist"},
		{"empty messages", webuiToken, `{"model":"nanobot","messages":[]}`, 400, "messages", "too short"},
		{"no messages", webuiToken, `{"model":"nanobot"}`, 400, "messages", "too short"},
		{"empty user message", webuiToken, msg(`"  "`), 400, "messages[0].content", "empty"},
		{"last is assistant", webuiToken, `{"model":"nanobot","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, 400, "messages[1].role", "must be the user's"},
		{"bad role", webuiToken, `{"model":"nanobot","messages":[{"role":"wizard","content":"x"},{"role":"user","content":"hi"}]}`, 400, "messages[0].role", "Invalid role"},
		{"n of 2", webuiToken, `{"model":"nanobot","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "n", "n must be 1"},
		{"link image", webuiToken, msg(`[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]`), 400, "messages[0].content[0].image_url", "inline images"},
		{"audio part", webuiToken, msg(`[{"type":"input_audio","input_audio":{}}]`), 400, "messages[0].content", ""},
		{"bad session id", webuiToken, `{"model":"nanobot","user":"a b/c","messages":[{"role":"user","content":"hi"}]}`, 400, "user", "session id"},
		{"invalid UTF-8", webuiToken, msg("\"caf\xe9\""), 400, "", "UTF-8"},
		{"huge body", webuiToken, msg(`"` + strings.Repeat("a", 70<<10) + `"`), 413, "", "larger than this server accepts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := h.raw(tc.token, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			e := parseError(t, body)
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param = %v, want %q: %s", e.Error.Param, tc.param, body)
			}
			if !strings.Contains(*e.Error.Message, tc.says) {
				t.Errorf("message %q does not say %q", *e.Error.Message, tc.says)
			}
			if strings.Contains(body, webuiToken) {
				t.Errorf("the key shows in the answer")
			}
		})
	}
	if n := len(h.script.Requests()); n != 0 {
		t.Errorf("refused requests reached the model %d times", n)
	}
	if files := h.sessionFiles(); len(files) != 0 {
		t.Errorf("refused requests left sessions: %v", files)
	}
}

func TestOtherPathsAndModelsNeedAKey(t *testing.T) {
	h := newHarness(t)
	if code, _, body := h.do(http.MethodGet, "/v1/models", "", ""); code != 401 {
		t.Errorf("GET /v1/models without a key: %d %s", code, body)
	}
	if code, _, body := h.do(http.MethodGet, "/v1/embeddings", webuiToken, ""); code != 404 || parseError(t, body).Error.Message == nil {
		t.Errorf("unknown path: %d %s", code, body)
	}
	if code, _, body := h.do(http.MethodGet, "/v1/models/smart", webuiToken, ""); code != 200 || !strings.Contains(body, `"id":"smart"`) {
		t.Errorf("GET /v1/models/smart: %d %s", code, body)
	}
	if code, _, body := h.do(http.MethodGet, "/v1/models/gpt-9", webuiToken, ""); code != 404 {
		t.Errorf("GET /v1/models/gpt-9: %d %s", code, body)
	}
}

// TestEveryRouteNeedsAKey covers authed, which every /v1 route goes through.
func TestEveryRouteNeedsAKey(t *testing.T) {
	h := newHarness(t)
	for _, route := range []struct{ method, path string }{
		{http.MethodPost, "/v1/chat/completions"},
		{http.MethodGet, "/v1/models"},
		{http.MethodGet, "/v1/models/smart"},
		{http.MethodGet, "/v1/embeddings"},
	} {
		for _, token := range []string{"", "sk-wrong-0123456789abc"} {
			code, _, body := h.do(route.method, route.path, token, `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`)
			if code != 401 || parseError(t, body).Error.Message == nil {
				t.Errorf("%s %s with key %q: %d %s, want an OpenAI-shaped 401", route.method, route.path, token, code, body)
			}
		}
	}
	if n := len(h.script.Requests()); n != 0 {
		t.Errorf("refused requests reached the model %d times", n)
	}
}

func TestNoKeysConfiguredRefusesEverything(t *testing.T) {
	h := newHarness(t, func(c *config.APIConfig) { c.Keys = nil })
	code, body := h.raw(webuiToken, `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`)
	if code != 401 || !strings.Contains(*parseError(t, body).Error.Message, "api.keys") {
		t.Fatalf("%d %s", code, body)
	}
}

func TestRateLimitPerKeyWithRetryAfter(t *testing.T) {
	h := newHarness(t, func(c *config.APIConfig) { c.RatePerMinute, c.Burst = 2, 1 })
	h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
	body := `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`
	if code, b := h.raw(webuiToken, body); code != 200 {
		t.Fatalf("first: %d %s", code, b)
	}
	code, hdr, b := h.do(http.MethodPost, "/v1/chat/completions", webuiToken, body)
	if code != 429 {
		t.Fatalf("second within the minute: %d %s", code, b)
	}
	if e := parseError(t, b); *e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("code = %s", *e.Error.Code)
	}
	if s, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || s < 1 || s > 30 {
		t.Errorf("Retry-After = %q, want the seconds until a request is allowed (30)", hdr.Get("Retry-After"))
	}
	// Another key has its own budget.
	if code, b := h.raw(scriptToken, body); code != 200 {
		t.Errorf("other key: %d %s", code, b)
	}
	h.advance(30 * time.Second)
	if code, b := h.raw(webuiToken, body); code != 200 {
		t.Errorf("after the wait: %d %s", code, b)
	}
}

func TestConcurrencyLimitPerKey(t *testing.T) {
	h := newHarness(t, func(c *config.APIConfig) { c.MaxConcurrent = 1 })
	release := make(chan struct{})
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		<-release
		return fakellm.Reply{Text: "slow"}
	}
	body := `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`
	first := make(chan int, 1)
	go func() {
		code, _, _, err := h.try(http.MethodPost, "/v1/chat/completions", webuiToken, body)
		if err != nil {
			t.Error(err)
		}
		first <- code
	}()
	h.waitUntil("the first request at the model", func() bool { return len(h.script.Requests()) == 1 })
	code, hdr, b := h.do(http.MethodPost, "/v1/chat/completions", webuiToken, body)
	close(release)
	if code != 429 || hdr.Get("Retry-After") == "" || !strings.Contains(*parseError(t, b).Error.Message, "api.max_concurrent") {
		t.Errorf("second while the first runs: %d %v %s", code, hdr.Get("Retry-After"), b)
	}
	if c := <-first; c != 200 {
		t.Errorf("first: %d", c)
	}
	if code, b := h.raw(webuiToken, body); code != 200 {
		t.Errorf("after the first ended: %d %s", code, b)
	}
}

func TestKeysNeverLoggedButTheirNamesAre(t *testing.T) {
	h := newHarness(t)
	h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
	body := `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`
	if code, b := h.raw(webuiToken, body); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	if code, _ := h.raw("sk-guessed-0123456789abcdef", body); code != 401 {
		t.Fatalf("wrong key: %d", code)
	}
	named := false
	for _, e := range h.logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += " " + k + "=" + fmt.Sprint(v)
		}
		if strings.Contains(line, webuiToken) || strings.Contains(line, "sk-guessed") {
			t.Errorf("a key shows in the log: %s", line)
		}
		if e.Message == "api request" && e.ContextMap()["key"] == "webui" {
			named = true
		}
	}
	if !named {
		t.Error("no log line names the key webui")
	}
}

func TestShutdownAnswersRunningRequestsAndRefusesNewOnes(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		<-release
		return fakellm.Reply{Text: "finished"}
	}
	body := `{"model":"nanobot","user":"late","messages":[{"role":"user","content":"hi"}]}`
	running := make(chan string, 1)
	go func() {
		code, _, b, err := h.try(http.MethodPost, "/v1/chat/completions", webuiToken, body)
		running <- fmt.Sprint(code, " ", b, err)
	}()
	h.waitUntil("the turn at the model", func() bool { return len(h.script.Requests()) == 1 })
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	<-h.intakeDone
	code, hdr, b := h.do(http.MethodPost, "/v1/chat/completions", webuiToken, body)
	if code != 503 || hdr.Get("Retry-After") == "" || *parseError(t, b).Error.Code != "unavailable" {
		t.Errorf("a request during shutdown: %d %s", code, b)
	}
	close(release)
	if got := <-running; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"content":"finished"`) {
		t.Errorf("the running request got %s", got)
	}
	<-stopped
	if n := len(h.session("api:webui:late")); n != 2 {
		t.Errorf("session has %d messages, want 2", n)
	}
}

func TestTurnTimeoutAnswers504AndKeepsTheSessionUntilTheTurnEnds(t *testing.T) {
	h := newHarness(t, func(c *config.APIConfig) { c.TurnTimeout = 50 * time.Millisecond })
	release := make(chan struct{})
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if strings.HasSuffix(r.LastUserText(), "slow") {
			<-release
		}
		return fakellm.Reply{Text: "answered"}
	}
	slow := `{"model":"nanobot","user":"t","messages":[{"role":"user","content":"slow"}]}`
	code, b := h.raw(webuiToken, slow)
	if code != 504 || *parseError(t, b).Error.Code != "timeout" {
		t.Fatalf("slow turn: %d %s", code, b)
	}
	// The turn still runs: the session waits for it, and says so.
	next := `{"model":"nanobot","user":"t","messages":[{"role":"user","content":"next"}]}`
	code, hdr, b := h.do(http.MethodPost, "/v1/chat/completions", webuiToken, next)
	if code != 429 || hdr.Get("Retry-After") == "" || *parseError(t, b).Error.Code != "session_busy" {
		t.Fatalf("while the slow turn runs: %d %s", code, b)
	}
	close(release)
	h.waitUntil("the slow turn saved", func() bool { return len(h.session("api:webui:t")) == 2 })
	h.waitUntil("the session free", func() bool {
		code, _ := h.raw(webuiToken, next)
		return code == 200
	})
	if n := len(h.session("api:webui:t")); n != 4 {
		t.Errorf("session has %d messages, want the slow turn and the next", n)
	}
}
