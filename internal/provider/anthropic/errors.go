package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// maxErrorBody bounds how much of a refusal's body is read.
const maxErrorBody = 1 << 20

// streamError classifies why a stream ended without message_stop:
//   - the caller cancelled: its context error, wrapped (not an APIError, so
//     nobody retries it);
//   - the configured timeout fired: a retryable APIError of type "timeout";
//   - the server sent `event: error`: that APIError (see apiError);
//   - the body was not valid event JSON: an APIError of type "invalid_stream";
//   - the connection failed before an answer: a retryable APIError (status 0);
//   - the stream had begun and then stopped: an error wrapping
//     llm.ErrTruncated (and the transport error, if any).
func (p *Provider) streamError(ctx, callCtx context.Context, err error, resp *http.Response) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic %s: %w", p.name, ctx.Err())
	}
	if callCtx.Err() != nil {
		return httpcall.Timeout(p.name, p.timeout, callCtx.Err())
	}
	var apiErr *llm.APIError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	opened := resp != nil && resp.StatusCode < 300
	switch {
	case errors.As(err, &apiErr):
		return err
	case errors.As(err, &syntaxErr) || errors.As(err, &typeErr):
		// typeErr: the JSON parsed but does not fit the event's shape.
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

// responseError reads a refusal (HTTP status >= 400) into an APIError; a
// body that cannot be read is classified like a failed request, and a call
// whose context ended meanwhile like any cancelled or timed-out call.
func (p *Provider) responseError(ctx, callCtx context.Context, resp *http.Response) error {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		err = fmt.Errorf("read error body: %w", err)
	}
	if err != nil || callCtx.Err() != nil {
		return p.streamError(ctx, callCtx, err, resp)
	}
	return p.apiError(resp, raw)
}

// apiError turns Anthropic's error envelope into *llm.APIError. For an
// HTTP refusal the status, Anthropic's error type and message and the
// server's requested wait are kept; an `event: error` inside a 200 stream
// has status 0 and its type. A body that is not the envelope (a proxy's
// page) becomes the message.
func (p *Provider) apiError(resp *http.Response, raw []byte) *llm.APIError {
	cause := &httpError{status: resp.StatusCode, requestID: resp.Header.Get("request-id"), body: strings.TrimSpace(string(raw))}
	if r := resp.Request; r != nil {
		cause.method, cause.path = r.Method, r.URL.Path
	}
	out := &llm.APIError{Provider: p.name, Err: cause}
	var body wireErrorBody
	if json.Unmarshal(raw, &body) == nil {
		out.Type, out.Message = body.Error.Type, body.Error.Message
	}
	if resp.StatusCode >= 400 {
		out.Status = resp.StatusCode
		out.RetryAfter = httpcall.RetryAfterMs(resp.Header, time.Now())
	}
	if out.Message == "" {
		out.Message = cause.body
	}
	out.Kind = vocabulary.Kind(out.Status, out.Type, out.Message)
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

// vocabulary is what Anthropic's error types mean in the failure table
// (https://docs.anthropic.com/en/api/errors); a refusal for a prompt over
// the context window has no type of its own, only its message.
var vocabulary = httpcall.Vocabulary{
	Types: map[string]llm.Kind{
		"authentication_error": llm.KindAuth, "permission_error": llm.KindAuth,
		"billing_error":    llm.KindQuota,
		"rate_limit_error": llm.KindRateLimit,
		"overloaded_error": llm.KindUnavailable, "api_error": llm.KindUnavailable,
		"invalid_request_error": llm.KindRejected, "not_found_error": llm.KindRejected, "request_too_large": llm.KindRejected,
	},
	TooLong: []string{"prompt is too long"},
}

// httpError is the cause an APIError keeps: the call, the answer's status,
// the request id Anthropic's support asks for, and the body.
type httpError struct {
	method, path string
	status       int
	requestID    string
	body         string
}

func (e *httpError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, http.StatusText(e.status))
	if e.requestID != "" {
		msg += " (request-id " + e.requestID + ")"
	}
	if e.body != "" {
		msg += ": " + e.body
	}
	return msg
}
