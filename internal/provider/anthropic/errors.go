package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// streamError classifies why a stream ended without message_stop:
//   - the caller cancelled: its context error, wrapped (not an APIError, so
//     nobody retries it);
//   - the configured timeout fired: a retryable APIError of type "timeout";
//   - the server refused (HTTP status) or sent `event: error`: an APIError
//     with its status, type, message and Retry-After;
//   - the body was not valid event JSON: an APIError of type "invalid_stream";
//   - the connection failed before an answer: a retryable APIError (status 0);
//   - the stream had begun and then stopped: an error wrapping
//     llm.ErrTruncated (and the transport error, if any).
func (p *Provider) streamError(ctx, callCtx context.Context, err error, resp *http.Response) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic %s: %w", p.name, ctx.Err())
	}
	if callCtx.Err() != nil {
		return &llm.APIError{Provider: p.name, Type: "timeout",
			Message: fmt.Sprintf("no complete answer within %s", p.timeout), Err: callCtx.Err()}
	}
	var apiErr *sdk.Error
	var syntaxErr *json.SyntaxError
	opened := resp != nil && resp.StatusCode < 300
	switch {
	case errors.As(err, &apiErr):
		return p.apiError(err, resp)
	case errors.As(err, &syntaxErr) || isDecodeError(err):
		return &llm.APIError{Provider: p.name, Type: "invalid_stream",
			Message: "server sent an event that is not valid JSON", Err: err}
	case err != nil && !opened:
		return &llm.APIError{Provider: p.name, Message: "request failed", Err: err}
	case err != nil:
		return fmt.Errorf("anthropic %s: stream broken before message_stop: %w: %w", p.name, llm.ErrTruncated, err)
	default:
		return fmt.Errorf("anthropic %s: stream ended before message_stop: %w", p.name, llm.ErrTruncated)
	}
}

// isDecodeError recognises an event whose JSON parsed but does not fit the
// event's shape.
func isDecodeError(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr)
}

// apiError turns an SDK error into *llm.APIError. For an HTTP refusal the
// status, Anthropic's error type and message and the server's requested wait
// are kept; an `event: error` inside a 200 stream has status 0 and its type.
func (p *Provider) apiError(err error, resp *http.Response) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return &llm.APIError{Provider: p.name, Message: "request failed", Err: err}
	}
	out := &llm.APIError{Provider: p.name, Type: string(apiErr.Type()), Err: err}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil {
		out.Message = body.Error.Message
		if out.Type == "" {
			out.Type = body.Error.Type
		}
	}
	if apiErr.StatusCode >= 400 {
		out.Status = apiErr.StatusCode
		// The SDK error keeps the response; resp (recorded by the call) is
		// the fallback should a future SDK stop doing so.
		header := http.Header(nil)
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		} else if resp != nil {
			header = resp.Header
		}
		out.RetryAfter = retryAfter(header, p.now())
	}
	if out.Message == "" {
		out.Message = strings.TrimSpace(apiErr.RawJSON())
	}
	if out.Status == 0 && out.Type != "" {
		// llm.APIError prints no type without a status; a mid-stream error
		// is only understandable with it.
		out.Message = "stream error " + out.Type + ": " + out.Message
	}
	if out.Message == "" && out.Status != 0 {
		out.Message = http.StatusText(out.Status)
	}
	return out
}

// retryAfter reads retry-after-ms (milliseconds, Anthropic's precise form)
// or Retry-After (seconds or an HTTP date). Zero means no usable value.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
