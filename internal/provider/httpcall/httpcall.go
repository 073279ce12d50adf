// Package httpcall holds what one HTTP call to a model provider means the
// same way whatever its protocol: sending it with the configured extra
// headers, bounding it by the configured timeout, the failure reported when
// that timeout fires, the wait a refusal asks for (Retry-After), reading a
// refusal into the failure table by the protocol's vocabulary (Vocabulary),
// and the key scrubbed from text a server echoes back. The adapters (anthropic, gemini,
// openai) import it; what a protocol's answers and error bodies say stays in
// each adapter.
package httpcall

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Do sends one request: body is sent as is (none when nil), header sets the
// protocol's headers, and the configured extra headers are set last, so
// they may override any of them.
func Do(ctx context.Context, c *http.Client, method, url string, body []byte, extra map[string]string, header func(http.Header)) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	header(req.Header)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return c.Do(req)
}

// Context bounds one call by the configured timeout; zero means no bound of
// its own (the caller's context still ends it).
func Context(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

// Timeout is the failure of a call the configured timeout ended: a
// retryable APIError of kind llm.KindTimeout, err its cause.
func Timeout(provider string, timeout time.Duration, err error) *llm.APIError {
	return &llm.APIError{Provider: provider, Type: "timeout", Kind: llm.KindTimeout,
		Message: fmt.Sprintf("no complete answer within %s", timeout), Err: err}
}

// RetryAfter reads Retry-After, as seconds or an HTTP date. Zero means no
// usable value.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs > 0) { // negative, or NaN
			return 0
		}
		return duration(secs, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// RetryAfterMs reads retry-after-ms, the precise form OpenAI and Anthropic
// send, then Retry-After. A value of retry-after-ms that is not a positive
// number of milliseconds is passed over.
func RetryAfterMs(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return duration(ms, time.Millisecond)
		}
	}
	return RetryAfter(h, now)
}

// duration is n units, at most the longest Duration: a server asking for
// 1e300 seconds means "not soon", not the negative number an overflowing
// conversion would make of it.
func duration(n float64, unit time.Duration) time.Duration {
	if d := n * float64(unit); d < float64(math.MaxInt64) {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// Scrub removes the API key from text a server or transport echoed back. A
// key shorter than 8 characters (a placeholder for a local server) is left
// alone, so that ordinary words are not redacted.
func Scrub(s, key string) string {
	if len(key) >= 8 {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	return s
}

// Clip is at most the first n bytes of b: what of an unreadable body or
// chunk is worth quoting.
func Clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
