package health

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/clock"
)

func readyz(t *testing.T, c *Checker) (int, Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var r Report
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("/readyz body is not JSON: %v: %s", err, rec.Body)
	}
	return rec.Code, r
}

func TestReadiness(t *testing.T) {
	var telegram, discord error
	c := New(func(s string) string { return strings.ReplaceAll(s, "SECRET", "[REDACTED]") })
	c.Add("telegram", func() error { return telegram })
	c.Add("discord", func() error { return discord })

	tests := []struct {
		name      string
		telegram  error
		discord   error
		drain     bool
		wantCode  int
		wantError string
	}{
		{"all connected", nil, nil, false, 200, ""},
		{"telegram down", errors.New("getUpdates: connection refused (token SECRET)"), nil, false, 503,
			"telegram: getUpdates: connection refused (token [REDACTED])"},
		{"recovered", nil, nil, false, 200, ""},
		{"both down", errors.New("a"), errors.New("b"), false, 503, "telegram: a; discord: b"},
		{"shutting down", nil, nil, true, 503, "shutdown: shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			telegram, discord = tt.telegram, tt.discord
			if tt.drain {
				c.Drain()
			}
			code, r := readyz(t, c)
			if code != tt.wantCode || r.Ready != (tt.wantCode == 200) {
				t.Errorf("code %d ready %v, want %d", code, r.Ready, tt.wantCode)
			}
			var errs []string
			for _, res := range r.Checks {
				if !res.OK {
					errs = append(errs, res.Name+": "+res.Error)
				}
			}
			if got := strings.Join(errs, "; "); got != tt.wantError {
				t.Errorf("failing checks %q, want %q", got, tt.wantError)
			}
		})
	}
}

func TestLive(t *testing.T) {
	rec := httptest.NewRecorder()
	Live(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 || rec.Body.String() != "ok\n" {
		t.Errorf("/healthz = %d %q", rec.Code, rec.Body)
	}
}

func TestModelHealth(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	m := &ModelHealth{Clock: clock.Func(func() time.Time { return now })}
	if err := m.Check(); err != nil {
		t.Fatalf("no call yet should be ready: %v", err)
	}
	m.Record(errors.New("openai: status 503: overloaded"))
	now = now.Add(90 * time.Second)
	err := m.Check()
	if err == nil || err.Error() != "the last model call (1m30s ago) failed: openai: status 503: overloaded; last success: never since start" {
		t.Fatalf("Check = %v", err)
	}
	m.Record(nil)
	if err := m.Check(); err != nil {
		t.Fatalf("a success should make it ready again: %v", err)
	}
	now = now.Add(time.Minute)
	m.Record(errors.New("refused"))
	now = now.Add(time.Second)
	if err := m.Check(); err == nil || !strings.HasSuffix(err.Error(), "last success: 1m1s ago") {
		t.Errorf("Check = %v, want the last success's age", err)
	}
}
