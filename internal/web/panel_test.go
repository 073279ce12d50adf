package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// memCron is an in-memory job list behind the panel's CronJobs interface
// (the daemon's adapter over the real scheduler is driven by the browser
// test).
type memCron struct {
	mu   sync.Mutex
	jobs []CronJob
}

func (c *memCron) All() ([]CronJob, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CronJob{}, c.jobs...), nil
}

func (c *memCron) Remove(id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, j := range c.jobs {
		if j.ID == id {
			c.jobs = append(c.jobs[:i], c.jobs[i+1:]...)
			return true, nil
		}
	}
	return false, nil
}

type panelEnv struct {
	*env
	cron    *memCron
	pairing *channels.PairingStore
	ledger  *usage.Ledger
}

func newPanelEnv(t *testing.T) *panelEnv {
	t.Helper()
	p := &panelEnv{cron: &memCron{jobs: []CronJob{{ID: "j1", Session: "telegram:42", Schedule: "every 1h", Message: "drink water"}}}}
	p.env = newEnv(t, func(_ *config.WebChannelConfig, d *Deps) {
		p.pairing = channels.NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
		l, err := usage.Open(t.TempDir(), usage.Options{Clock: d.Clock, Prices: usage.NewPriceTable(nil), Log: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		p.ledger = l
		d.Panel = &Panel{Version: "v-test", Started: d.Clock.Now(), Model: "openai/gpt-4o-mini", Routes: map[string]string{"smart": "anthropic/x"},
			Budget: 100000, Workspace: d.Workspace, Cron: p.cron, Pairing: p.pairing,
			Channels: func() []ChannelState { return []ChannelState{{Name: "telegram", Up: false, Error: "polling stalled"}} },
			Ledger:   l,
		}
	})
	return p
}

func TestPanelRequiresLoginAndCSRF(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	for _, ep := range []struct{ method, path string }{
		{"GET", "/api/panel/status"}, {"GET", "/api/panel/sessions"}, {"GET", "/api/panel/sessions/web:x"},
		{"GET", "/api/panel/files"}, {"GET", "/api/panel/files/MEMORY.md"}, {"PUT", "/api/panel/files/MEMORY.md"},
		{"GET", "/api/panel/cron"}, {"DELETE", "/api/panel/cron/j1"}, {"GET", "/api/panel/pairing"},
		{"POST", "/api/panel/pairing/ABC/approve"}, {"POST", "/api/panel/pairing/ABC/deny"}, {"POST", "/api/panel/pairing/revoke"},
	} {
		if s := e.do(nil, ep.method, ep.path, map[string]string{}).StatusCode; s != http.StatusUnauthorized {
			t.Errorf("%s %s logged out: %d, want 401", ep.method, ep.path, s)
		}
		if ep.method != "GET" {
			if s := e.do(c, ep.method, ep.path, map[string]string{}, csrfHeader, "").StatusCode; s != http.StatusForbidden {
				t.Errorf("%s %s without CSRF: %d, want 403", ep.method, ep.path, s)
			}
		}
	}
	if s := e.do(c, "GET", "/api/panel/cron", nil).StatusCode; s != http.StatusOK {
		t.Fatalf("logged in: %d", s)
	}
}

func TestPanelStatus(t *testing.T) {
	e := newPanelEnv(t)
	now := e.clock.Now()
	e.record(now, "telegram:42", usage.OriginTurn, "openai/gpt-4o-mini", 5, 1)
	e.record(now.AddDate(0, 0, -1), "telegram:42", usage.OriginTurn, "openai/gpt-4o-mini", 4, 1)
	c := e.login()
	var s struct {
		Version  string
		Model    string
		Routes   map[string]string
		Channels []ChannelState
		Usage    []ModelUsage
		MCP      []MCPState
	}
	decode(t, e.do(c, "GET", "/api/panel/status", nil), &s)
	if s.Version != "v-test" || s.Model != "openai/gpt-4o-mini" || s.Routes["smart"] != "anthropic/x" ||
		len(s.Channels) != 1 || s.Channels[0].Up || len(s.Usage) != 1 || s.Usage[0].Today.Input != 5 || s.Usage[0].Month.Input != 9 ||
		s.Usage[0].Month.Calls != 2 || s.MCP == nil {
		t.Fatalf("status = %+v", s)
	}
}

func TestPanelMemoryEdit(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	mem := filepath.Join(e.ws, "memory", "MEMORY.md")
	if err := os.MkdirAll(filepath.Dir(mem), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mem, []byte("# Memory\n- likes tea\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	var f struct{ Content, ETag string }
	resp := e.do(c, "GET", "/api/panel/files/MEMORY.md", nil)
	decode(t, resp, &f)
	if f.Content != "# Memory\n- likes tea\n" || f.ETag == "" || resp.Header.Get("ETag") != f.ETag {
		t.Fatalf("read = %+v", f)
	}
	tests := []struct {
		name    string
		ifMatch string
		body    any
		want    int
	}{
		{"no precondition", "", map[string]string{"content": "x"}, http.StatusPreconditionRequired},
		{"stale etag", `"0000"`, map[string]string{"content": "x"}, http.StatusPreconditionFailed},
		{"malformed JSON", f.ETag, `{"content":`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s := e.do(c, "PUT", "/api/panel/files/MEMORY.md", tt.body, "If-Match", tt.ifMatch).StatusCode; s != tt.want {
				t.Fatalf("status %d, want %d", s, tt.want)
			}
		})
	}
	resp = e.do(c, "PUT", "/api/panel/files/MEMORY.md", map[string]string{"content": "# Memory\n- likes green tea\n"}, "If-Match", f.ETag)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("save: %d %s", resp.StatusCode, body(resp))
	}
	var saved struct{ ETag string }
	decode(t, resp, &saved)
	if got, _ := os.ReadFile(mem); string(got) != "# Memory\n- likes green tea\n" {
		t.Fatalf("file = %q", got)
	}
	if fi, _ := os.Stat(mem); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", fi.Mode().Perm())
	}
	// The assistant rewrites the file: an edit of the old version is refused.
	if err := os.WriteFile(mem, []byte("# Memory\n- moved to Rome\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	resp = e.do(c, "PUT", "/api/panel/files/MEMORY.md", map[string]string{"content": "mine"}, "If-Match", saved.ETag)
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(body(resp), "changed since you opened it") {
		t.Fatalf("edit over a changed file: %d", resp.StatusCode)
	}
	if got, _ := os.ReadFile(mem); string(got) != "# Memory\n- moved to Rome\n" {
		t.Fatalf("the newer file was overwritten: %q", got)
	}
	if s := e.do(c, "GET", "/api/panel/files/secrets.yaml", nil).StatusCode; s != http.StatusNotFound {
		t.Errorf("unknown file: %d", s)
	}
	if s := e.do(c, "PUT", "/api/panel/files/..%2Fconfig.yaml", map[string]string{"content": "x"}, "If-Match", `"x"`).StatusCode; s != http.StatusNotFound {
		t.Errorf("path outside the list: %d", s)
	}
}

// Concurrent editors of one version: exactly one wins, the others are told.
func TestPanelConcurrentMemoryEdits(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	var f struct{ ETag string }
	decode(t, e.do(c, "GET", "/api/panel/files/MEMORY.md", nil), &f)
	const n = 8
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			codes[i] = e.do(c, "PUT", "/api/panel/files/MEMORY.md", map[string]string{"content": fmt.Sprint("edit ", i)}, "If-Match", f.ETag).StatusCode
		})
	}
	wg.Wait()
	won := -1
	for i, code := range codes {
		switch code {
		case http.StatusOK:
			if won >= 0 {
				t.Fatalf("edits %d and %d both saved", won, i)
			}
			won = i
		case http.StatusPreconditionFailed:
		default:
			t.Fatalf("edit %d: status %d", i, code)
		}
	}
	got, _ := os.ReadFile(filepath.Join(e.ws, "memory", "MEMORY.md"))
	if won < 0 || string(got) != fmt.Sprint("edit ", won) {
		t.Fatalf("winner %d, file %q", won, got)
	}
}

func TestPanelBootstrapFiles(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	if err := os.WriteFile(filepath.Join(e.ws, "AGENTS.md"), []byte(strings.Repeat("x", 18*1024+300)), 0o600); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Files []struct {
			Name     string
			Exists   bool
			Size     int64
			SizeText string `json:"size_text"`
		}
	}
	decode(t, e.do(c, "GET", "/api/panel/files", nil), &list)
	if len(list.Files) != len(editable) || list.Files[1].Name != "AGENTS.md" {
		t.Fatalf("files = %+v", list.Files)
	}
	// Every size in the panel is in bytesize's one style (not "2923 B"
	// beside "18 KiB").
	for _, f := range list.Files {
		if f.SizeText != bytesize.Format(f.Size) {
			t.Errorf("%s: size_text %q for %d bytes, want %q", f.Name, f.SizeText, f.Size, bytesize.Format(f.Size))
		}
	}
	if got := list.Files[1].SizeText; got != "18.3 KiB" {
		t.Errorf("AGENTS.md of 18,732 bytes shows as %q", got)
	}
	var f struct{ ETag string }
	decode(t, e.do(c, "GET", "/api/panel/files/SOUL.md", nil), &f)
	if s := e.do(c, "PUT", "/api/panel/files/SOUL.md", map[string]string{"content": "Be brief."}, "If-Match", f.ETag).StatusCode; s != http.StatusOK {
		t.Fatalf("save SOUL.md: %d", s)
	}
	if got, _ := os.ReadFile(filepath.Join(e.ws, "SOUL.md")); string(got) != "Be brief." {
		t.Fatalf("SOUL.md = %q", got)
	}
}

func toolTurn(i int) []llm.Message {
	id := fmt.Sprint("call", i)
	call := llm.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.md"}`)}
	res := llm.ToolResult{ToolCallID: id, Name: "read_file", Content: llm.PlainContent(strings.Repeat(fmt.Sprintf("line %d of a long file\n", i), 400))}
	res.Content = history.Detail(call, res)
	return []llm.Message{
		llm.NewText(llm.RoleUser, fmt.Sprint("question ", i)),
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, Call: &call}}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &res}}},
		llm.NewText(llm.RoleAssistant, fmt.Sprint("answer ", i)),
	}
}

func TestPanelSessionsWithLOD(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	var msgs []llm.Message
	for i := range 9 {
		msgs = append(msgs, toolTurn(i)...)
	}
	if _, err := e.store.Append("telegram:42", msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Append("discord:7", llm.NewText(llm.RoleUser, "needle in a haystack")); err != nil {
		t.Fatal(err)
	}
	var list struct{ Sessions []sessionSummary }
	decode(t, e.do(c, "GET", "/api/panel/sessions", nil), &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("sessions = %+v", list.Sessions)
	}
	var s struct{ Messages []entry }
	decode(t, e.do(c, "GET", "/api/panel/sessions/telegram:42", nil), &s)
	var levels []string
	for _, m := range s.Messages {
		if m.Role == "tool" {
			levels = append(levels, m.Level)
		}
	}
	// Detail is spent by budget (docs/history.md#levels-of-detail): nine
	// results of ~2.4k tokens fit the panel's 100k budget, so all are sent
	// whole.
	if got := strings.Join(levels, " "); got != strings.TrimSpace(strings.Repeat("live ", 9)) {
		t.Fatalf("levels = %s; want all live", got)
	}
	// Over budget, the oldest are shortened first (the last call's step
	// went down to the low mark); the newest stays whole.
	lv := observationLevels(msgs, 0, history.Options{Budget: 12000})
	var tight []string
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			tight = append(tight, lv[i])
		}
	}
	if got := strings.Join(tight, " "); !strings.HasPrefix(got, "not sent ") && !strings.HasPrefix(got, "gist ") && !strings.HasPrefix(got, "summary ") ||
		!strings.HasSuffix(got, " live") || strings.Contains(got, "live summary") || strings.Contains(got, "live gist") || strings.Contains(got, "summary gist") {
		t.Fatalf("levels with a 12k budget = %s; want the oldest shortened, the newest live", got)
	}
	// A small budget leaves old turns out.
	if lv := observationLevels(msgs, 0, history.Options{Budget: 3000}); lv[2] != "not sent" || lv[len(lv)-2] == "not sent" {
		t.Fatalf("with a small budget: first %q, last %q", lv[2], lv[len(lv)-2])
	}
	// Messages before the consolidation offset are not sent: the agent
	// projects from the offset.
	if lv := observationLevels(msgs, 8, history.Options{Budget: 100000}); lv[2] != "not sent" || lv[6] != "not sent" || lv[10] != "live" {
		t.Fatalf("from offset 8: %q %q %q", lv[2], lv[6], lv[10])
	}
	var found struct{ Hits []hit }
	decode(t, e.do(c, "GET", "/api/panel/sessions?q=NEEDLE", nil), &found)
	if len(found.Hits) != 1 || found.Hits[0].Key != "discord:7" || !strings.Contains(found.Hits[0].Snippet, "needle") {
		t.Fatalf("search = %+v", found.Hits)
	}
	if s := e.do(c, "GET", "/api/panel/sessions/telegram:999", nil).StatusCode; s != http.StatusNotFound {
		t.Fatalf("unknown session: %d", s)
	}
}

func TestPanelCron(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	var list struct{ Jobs []CronJob }
	decode(t, e.do(c, "GET", "/api/panel/cron", nil), &list)
	if len(list.Jobs) != 1 || list.Jobs[0].Message != "drink water" {
		t.Fatalf("jobs = %+v", list.Jobs)
	}
	if s := e.do(c, "DELETE", "/api/panel/cron/j1", nil).StatusCode; s != http.StatusNoContent {
		t.Fatalf("remove: %d", s)
	}
	if s := e.do(c, "DELETE", "/api/panel/cron/j1", nil).StatusCode; s != http.StatusNotFound {
		t.Fatalf("remove twice: %d", s)
	}
}

func TestPanelPairing(t *testing.T) {
	e := newPanelEnv(t)
	c := e.login()
	code, err := e.pairing.Request("telegram", "42", "@bob", "42")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := e.pairing.Request("discord", "7", "eve", "7")
	var st channels.PairingState
	decode(t, e.do(c, "GET", "/api/panel/pairing", nil), &st)
	if len(st.Pending) != 2 {
		t.Fatalf("pending = %+v", st.Pending)
	}
	if s := e.do(c, "POST", "/api/panel/pairing/"+code+"/approve", nil).StatusCode; s != http.StatusOK {
		t.Fatalf("approve: %d", s)
	}
	if ok, _ := e.pairing.IsApproved("telegram", "42"); !ok {
		t.Fatal("not approved")
	}
	if s := e.do(c, "POST", "/api/panel/pairing/"+code+"/approve", nil).StatusCode; s != http.StatusNotFound {
		t.Fatalf("approve twice: %d", s)
	}
	if s := e.do(c, "POST", "/api/panel/pairing/"+other+"/deny", nil).StatusCode; s != http.StatusOK {
		t.Fatalf("deny: %d", s)
	}
	if s := e.do(c, "POST", "/api/panel/pairing/revoke", map[string]string{"channel": "telegram", "sender_id": "42"}).StatusCode; s != http.StatusNoContent {
		t.Fatalf("revoke: %d", s)
	}
	if s := e.do(c, "POST", "/api/panel/pairing/revoke", map[string]string{"channel": "telegram", "sender_id": "42"}).StatusCode; s != http.StatusNotFound {
		t.Fatalf("revoke twice: %d", s)
	}
	if s := e.do(c, "POST", "/api/panel/pairing/revoke", `{"channel":`).StatusCode; s != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d", s)
	}
	decode(t, e.do(c, "GET", "/api/panel/pairing", nil), &st)
	if len(st.Pending) != 0 || len(st.Approved) != 0 {
		t.Fatalf("after approve, deny, revoke: %+v", st)
	}
}

// TestRemoved covers the answer the panel's removals share (a cron job, a
// pairing approval), the store's failure included.
func TestRemoved(t *testing.T) {
	tests := []struct {
		name   string
		ok     bool
		err    error
		status int
		body   string
	}{
		{"removed", true, nil, http.StatusNoContent, ""},
		{"nothing there", false, nil, http.StatusNotFound, "no such thing"},
		{"store failed", false, errors.New("disk full"), http.StatusInternalServerError, "remove the thing failed; see the daemon log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Panel{log: zap.NewNop()}
			w := httptest.NewRecorder()
			p.removed(w, tt.ok, tt.err, "remove the thing", "no such thing")
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("answer = %d %q, want %d with %q", w.Code, w.Body.String(), tt.status, tt.body)
			}
			if strings.Contains(w.Body.String(), "disk full") {
				t.Error("the store's error reached the browser; it belongs in the log")
			}
		})
	}
}

// TestPanelReplacesHostileFile: a bootstrap file that is a link to a secret
// outside, or a FIFO, is shown empty with the reason (never read, never
// waited on), and saving replaces it with a regular file, leaving the
// link's target alone.
func TestPanelReplacesHostileFile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(secret, []byte("api_key: sk-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(full string) error{
		"link out": func(full string) error { return os.Symlink(secret, full) },
		"FIFO":     func(full string) error { return syscall.Mkfifo(full, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			e := newPanelEnv(t)
			c := e.login()
			full := filepath.Join(e.ws, "USER.md")
			_ = os.Remove(full)
			if err := plant(full); err != nil {
				t.Fatal(err)
			}
			var f struct{ Content, ETag, Problem string }
			decode(t, e.do(c, "GET", "/api/panel/files/USER.md", nil), &f)
			if f.Content != "" || f.Problem == "" || strings.Contains(f.Content, "SECRET") {
				t.Fatalf("USER.md read as %+v; want empty content and a problem", f)
			}
			if s := e.do(c, "PUT", "/api/panel/files/USER.md", map[string]string{"content": "name: Ada"}, "If-Match", f.ETag).StatusCode; s != http.StatusOK {
				t.Fatalf("save USER.md: %d", s)
			}
			if fi, err := os.Lstat(full); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("USER.md after the save: %v, %v", fi, err)
			}
			if got, _ := os.ReadFile(secret); string(got) != "api_key: sk-SECRET" {
				t.Errorf("the link's target was written: %q", got)
			}
		})
	}
}

func (p *panelEnv) record(at time.Time, chat string, origin usage.Origin, model string, in, out int) {
	p.t.Helper()
	prov, id, _ := strings.Cut(model, "/")
	if err := p.ledger.Record(context.Background(), usage.Record{Time: at, Chat: chat, Session: chat, Origin: origin, Provider: prov, Model: id,
		Tokens: llm.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: in / 2}, Outcome: usage.OutcomeOK}); err != nil {
		p.t.Fatal(err)
	}
}

// The Usage view's data is the ledger's: one day per date of the last 30
// (zeros too), each with its groups, and totals that equal the ledger's
// own query of the period, by origin or by model.
func TestPanelUsage(t *testing.T) {
	e := newPanelEnv(t)
	now := e.clock.Now()
	e.record(now, "telegram:42", usage.OriginTurn, "openai/gpt-4o-mini", 1_000_000, 1000)
	e.record(now, "telegram:42", usage.OriginHeartbeat, "anthropic/claude-haiku-4-5", 2000, 100)
	e.record(now.AddDate(0, 0, -3), "discord:7", usage.OriginCron, "ollama/llama3", 500, 50)    // unpriced
	e.record(now.AddDate(0, 0, -40), "discord:7", usage.OriginTurn, "openai/gpt-4o-mini", 9, 9) // before the 30 days
	c := e.login()
	for _, by := range []usage.Dimension{usage.ByOrigin, usage.ByModel} {
		var v UsageView
		decode(t, e.do(c, "GET", "/api/panel/usage?by="+string(by), nil), &v)
		want, err := e.ledger.Query(usage.Query{Period: usage.LastDays(now, time.UTC, 30), By: by, Daily: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Days) != 30 || v.To != now.Format(time.DateOnly) || !reflect.DeepEqual(v.Total, totalsOf(want.Total)) || v.Total.Calls != 3 {
			t.Fatalf("by %s: %d days to %s, total %+v; want 30 to today and the ledger's %+v", by, len(v.Days), v.To, v.Total, totalsOf(want.Total))
		}
		if v.Total.Cost != nil || v.Total.CostText != "unpriced" || v.Total.Unpriced != 1 || v.Total.Priced <= 0 {
			t.Errorf("by %s: total cost %+v, want null (a model without a price) with the priced part", by, v.Total)
		}
		if len(v.Keys) != 3 || len(v.Groups) != 3 {
			t.Errorf("by %s: keys %v", by, v.Keys)
		}
		for i, d := range v.Days {
			if !reflect.DeepEqual(d.UsageTotals, totalsOf(want.Days[i].Totals)) || len(d.Groups) != len(want.Days[i].Groups) {
				t.Errorf("by %s: day %s = %+v, the ledger's %+v", by, d.Date, d, want.Days[i])
			}
		}
	}
	for _, q := range []string{"?by=weekday", "?days=0", "?days=367", "?days=x"} {
		if s := e.do(c, "GET", "/api/panel/usage"+q, nil).StatusCode; s != http.StatusBadRequest {
			t.Errorf("GET /api/panel/usage%s = %d, want 400", q, s)
		}
	}
	if s := e.do(nil, "GET", "/api/panel/usage", nil).StatusCode; s != http.StatusUnauthorized {
		t.Errorf("logged out: %d", s)
	}
}
