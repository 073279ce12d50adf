package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// maxResponseBody caps a Bot API answer (getUpdates with 100 updates is far
// below it).
const maxResponseBody = 16 << 20

// errAfterWrite marks a failure that happened after the whole request was
// written: Telegram may have acted on it.
type errAfterWrite struct{ err error }

func (e *errAfterWrite) Error() string { return e.err.Error() }
func (e *errAfterWrite) Unwrap() error { return e.err }

// traceClient is the bot library's HTTP client. It records whether a request
// was fully written before it failed, which is what tells "not sent, retry"
// from "maybe sent, do not repeat", and reads the body before returning so a
// broken read after a delivered request is also reported as after-write.
type traceClient struct{ c *http.Client }

func (t traceClient) Do(req *http.Request) (*http.Response, error) {
	if err := fixLength(req); err != nil {
		return nil, err // nothing was sent
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := t.c.Do(req)
	if err != nil {
		if wrote.Load() {
			return nil, &errAfterWrite{err}
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	if err != nil {
		return nil, &errAfterWrite{fmt.Errorf("read response: %w", err)}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// smallBody is the size up to which a request body of unknown length is
// read before sending.
const smallBody = 64 << 10

// fixLength reads a small body of unknown length before it is sent. The bot
// library streams every form through a pipe, so net/http sends it chunked
// and flushes each chunk: a sendMessage took a dozen write calls and as many
// goroutine hand-offs; with its length known it goes out in one. A larger
// body (a file upload) is sent as it comes, its first part read already.
func fixLength(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength > 0 {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(req.Body, smallBody+1))
	if err != nil {
		req.Body.Close()
		return err
	}
	if len(head) > smallBody {
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), req.Body), req.Body}
		return nil
	}
	req.Body.Close()
	req.ContentLength = int64(len(head))
	if len(head) == 0 {
		// A zero length with a body would mean "unknown" to net/http.
		req.Body = http.NoBody
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return nil
	}
	req.Body = io.NopCloser(bytes.NewReader(head))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(head)), nil }
	return nil
}

// newHTTPClient builds the client for all Bot API traffic, through proxy
// when set (http, https or socks5 URL).
func newHTTPClient(base *http.Client, proxy string) (*http.Client, error) {
	if base != nil {
		return base, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("channels.telegram.proxy: %q is not a proxy URL", proxy)
		}
		switch u.Scheme {
		case "http", "https", "socks5", "socks5h":
		default:
			return nil, fmt.Errorf("channels.telegram.proxy: scheme %q is not http, https or socks5", u.Scheme)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	// No client timeout: every call carries its own deadline (long polls
	// last longer than sends).
	return &http.Client{Transport: tr}, nil
}

// mapError turns a bot library error into the channels error vocabulary.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	var tm *bot.TooManyRequestsError
	var mig *bot.MigrateError
	var aw *errAfterWrite
	desc := strings.ToLower(err.Error())
	switch {
	case errors.As(err, &tm):
		return &channels.RateLimitError{RetryAfter: time.Duration(tm.RetryAfter) * time.Second, Err: fmt.Errorf("telegram %s: %w", op, err)}
	case errors.As(err, &mig):
		return &channels.PermanentError{Err: fmt.Errorf("telegram %s: group became supergroup %d: %w", op, mig.MigrateToChatID, err)}
	case errors.Is(err, bot.ErrorBadRequest) && strings.Contains(desc, "can't parse entities"):
		return fmt.Errorf("telegram %s: %w: %v", op, channels.ErrBadMarkup, err)
	case errors.Is(err, bot.ErrorBadRequest) && strings.Contains(desc, "message is not modified"):
		return fmt.Errorf("telegram %s: %w", op, channels.ErrNotModified)
	case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorForbidden),
		errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound):
		return &channels.PermanentError{Err: fmt.Errorf("telegram %s: %w", op, err)}
	case errors.As(err, &aw):
		return &channels.UnknownOutcomeError{Err: fmt.Errorf("telegram %s: %w", op, err)}
	}
	// Not written (dial, DNS, connection refused), or a 5xx: Telegram did
	// not act on it, so retrying is safe.
	return fmt.Errorf("telegram %s: %w", op, err)
}

// apiErr is a Bot API refusal seen by the raw getUpdates call.
type apiErr struct {
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiErr) Error() string { return fmt.Sprintf("telegram: %d %s", e.Code, e.Description) }

// getUpdates long-polls. The library's own loop confirms updates before
// they are handled, ignores retry_after and cannot be watched for stalls,
// so the adapter makes this one call itself.
func (c *Channel) getUpdates(ctx context.Context, offset int64, timeout time.Duration) ([]json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{
		"offset":          offset,
		"timeout":         int(timeout / time.Second),
		"allowed_updates": allowedUpdates,
	})
	u := c.apiURL + "/bot" + c.token + "/getUpdates"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("telegram getUpdates: %s", c.scrub(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// Do not wrap: the error text holds the URL, and so the token.
		return nil, fmt.Errorf("telegram getUpdates: %s", c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("telegram getUpdates: read: %s", c.scrub(err.Error()))
	}
	var env struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("telegram getUpdates: HTTP %d, undecodable answer: %w", resp.StatusCode, err)
	}
	if !env.OK {
		return nil, &apiErr{Code: env.ErrorCode, Description: env.Description, RetryAfter: env.Parameters.RetryAfter}
	}
	return env.Result, nil
}

// scrub removes the token from a message.
func (c *Channel) scrub(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "<token>")
}

// allowedUpdates are the kinds of update the channel asks for: new and
// edited messages (docs/channels.md#edited-messages).
var allowedUpdates = []string{models.AllowedUpdateMessage, models.AllowedUpdateEditedMessage}
