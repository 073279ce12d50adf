package httpcall

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration // RetryAfter's answer
		wantMs time.Duration // RetryAfterMs's answer
	}{
		{"none", nil, 0, 0},
		{"seconds", map[string]string{"Retry-After": "12"}, 12 * time.Second, 12 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, 500 * time.Millisecond},
		{"padded", map[string]string{"Retry-After": " 3 "}, 3 * time.Second, 3 * time.Second},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, 90 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, 0},
		{"zero", map[string]string{"Retry-After": "0"}, 0, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0, 0},
		{"not a number", map[string]string{"Retry-After": "NaN"}, 0, 0},
		{"garbage", map[string]string{"Retry-After": "tomorrow"}, 0, 0},
		{"milliseconds preferred", map[string]string{"Retry-After": "12", "Retry-After-Ms": "250"}, 12 * time.Second, 250 * time.Millisecond},
		{"milliseconds alone", map[string]string{"retry-after-ms": "1500"}, 0, 1500 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After": "3", "Retry-After-Ms": "soon"}, 3 * time.Second, 3 * time.Second},
		{"zero milliseconds fall back", map[string]string{"Retry-After": "3", "Retry-After-Ms": "0"}, 3 * time.Second, 3 * time.Second},
		{"beyond any duration", map[string]string{"Retry-After": "1e300", "Retry-After-Ms": "1e300"}, math.MaxInt64, math.MaxInt64},
		{"negative milliseconds fall back", map[string]string{"Retry-After": "3", "Retry-After-Ms": "-1"}, 3 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter = %s, want %s", got, tt.want)
			}
			if got := RetryAfterMs(h, now); got != tt.wantMs {
				t.Errorf("RetryAfterMs = %s, want %s", got, tt.wantMs)
			}
		})
	}
	if got := RetryAfterMs(nil, now); got != 0 {
		t.Errorf("RetryAfterMs(nil) = %s, want 0", got)
	}
}

func TestScrub(t *testing.T) {
	tests := []struct {
		name, s, key, want string
	}{
		{"key echoed", "bad key sk-secret-value-1234 given", "sk-secret-value-1234", "bad key [redacted] given"},
		{"twice", "k=sk-secret-1 and sk-secret-1", "sk-secret-1", "k=[redacted] and [redacted]"},
		{"no key", "bad key given", "", "bad key given"},
		{"short key kept", "the word none stays", "none", "the word none stays"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Scrub(tt.s, tt.key); got != tt.want {
				t.Errorf("Scrub = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"", 3, ""},
	}
	for _, tt := range tests {
		if got := string(Clip([]byte(tt.in), tt.n)); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestTimeout(t *testing.T) {
	err := Timeout("main", 30*time.Second, context.DeadlineExceeded)
	if err.Provider != "main" || err.Type != "timeout" || err.Message != "no complete answer within 30s" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Timeout = %+v", err)
	}
	if k := llm.Classify(err).Kind; k != llm.KindTimeout {
		t.Errorf("classified as %s, want %s", k, llm.KindTimeout)
	}
}

// TestDo: the protocol's headers are set, then the configured extra headers
// over them; the body is sent as is, and none for a nil body.
func TestDo(t *testing.T) {
	type seen struct {
		method, auth, version, length string
		body                          string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Get("Authorization"), r.Header.Get("X-Version"), r.Header.Get("Content-Length"), string(b)}
	}))
	t.Cleanup(srv.Close)
	header := func(h http.Header) {
		h.Set("authorization", "Bearer key")
		h.Set("x-version", "1")
	}
	tests := []struct {
		name  string
		body  []byte
		extra map[string]string
		want  seen
	}{
		{"post", []byte(`{"a":1}`), nil, seen{http.MethodPost, "Bearer key", "1", "7", `{"a":1}`}},
		{"get", nil, nil, seen{http.MethodGet, "Bearer key", "1", "", ""}},
		{"extra overrides", nil, map[string]string{"X-Version": "2"}, seen{http.MethodGet, "Bearer key", "2", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodGet
			if tt.body != nil {
				method = http.MethodPost
			}
			resp, err := Do(context.Background(), srv.Client(), method, srv.URL, tt.body, tt.extra, header)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s := <-got; s != tt.want {
				t.Errorf("server saw %+v, want %+v", s, tt.want)
			}
		})
	}
}
