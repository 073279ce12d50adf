package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// maxErrorBody bounds how much of a refusal's body is read.
const maxErrorBody = 64 << 10

// transportError classifies a failure to get or read an answer:
//   - the caller cancelled: its context error, wrapped (nobody retries it);
//   - the configured timeout fired: a retryable APIError of type "timeout";
//   - the answer had begun (opened) and then broke: llm.ErrTruncated;
//   - no answer at all: a retryable APIError with status 0.
func (p *Provider) transportError(ctx, callCtx context.Context, err error, opened bool) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("gemini %s: %w", p.name, ctx.Err())
	case callCtx.Err() != nil:
		return httpcall.Timeout(p.name, p.timeout, callCtx.Err())
	case opened:
		return fmt.Errorf("gemini %s: stream broken before its finish reason: %w: %w", p.name, llm.ErrTruncated, err)
	}
	return &llm.APIError{Provider: p.name, Type: "transport", Message: p.scrub(err.Error()), Err: err}
}

// statusError turns a refusal (HTTP status ≥ 300) into an APIError with
// Google's status name as its type (ErrorInfo's reason instead when it
// names a bad key) and the wait the server asked for: RetryInfo's
// retryDelay in the body, else Retry-After.
func (p *Provider) statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error *wireError `json:"error"`
	}
	out := &llm.APIError{Provider: p.name, Status: resp.StatusCode}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		p.fillError(out, body.Error)
	} else {
		// Not Google's error object: a proxy's page, a bare string.
		out.Message = strings.TrimSpace(string(httpcall.Clip(raw, 300)))
	}
	if out.Message == "" {
		out.Message = http.StatusText(resp.StatusCode)
	}
	out.Kind = vocabulary.Kind(out.Status, out.Type, out.Message)
	if out.RetryAfter == 0 {
		out.RetryAfter = httpcall.RetryAfter(resp.Header, time.Now())
	}
	return out
}

// bodyError converts an error object sent inside a stream.
func (p *Provider) bodyError(e *wireError) error {
	out := &llm.APIError{Provider: p.name}
	if e.Code >= 400 && e.Code < 600 {
		out.Status = e.Code
	}
	p.fillError(out, e)
	out.Kind = vocabulary.Kind(out.Status, out.Type, out.Message)
	if out.Message == "" {
		out.Message = "error event in stream"
	}
	return out
}

// fillError copies Google's status, message, reason and retry delay.
func (p *Provider) fillError(out *llm.APIError, e *wireError) {
	out.Type = e.Status
	out.Message = p.scrub(e.Message)
	for _, raw := range e.Details {
		var d struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
			Reason     string `json:"reason"`
		}
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			out.RetryAfter = parseDuration(d.RetryDelay)
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && d.Reason == "API_KEY_INVALID":
			// 400 INVALID_ARGUMENT is how Gemini refuses a bad key; the
			// reason is what makes it an authentication failure.
			out.Type = d.Reason
		}
	}
}

// vocabulary is what Google's canonical status names (and ErrorInfo's
// reason for a bad key, which arrives as a 400 INVALID_ARGUMENT) mean in
// the failure table; a prompt over the context window is a 400 that says
// so only in its message.
var vocabulary = httpcall.Vocabulary{
	Types: map[string]llm.Kind{
		"API_KEY_INVALID": llm.KindAuth, "UNAUTHENTICATED": llm.KindAuth, "PERMISSION_DENIED": llm.KindAuth,
		"RESOURCE_EXHAUSTED": llm.KindRateLimit,
		"UNAVAILABLE":        llm.KindUnavailable, "INTERNAL": llm.KindUnavailable, "DEADLINE_EXCEEDED": llm.KindUnavailable,
		"INVALID_ARGUMENT": llm.KindRejected, "FAILED_PRECONDITION": llm.KindRejected, "NOT_FOUND": llm.KindRejected,
	},
	TooLong: []string{"exceeds the maximum number of tokens"},
}

// parseDuration reads a google.protobuf.Duration in JSON ("34s", "0.5s"),
// which time.ParseDuration reads as written. Zero means no usable value.
func parseDuration(s string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// scrub removes the API key from text a server or transport echoed back.
func (p *Provider) scrub(s string) string { return httpcall.Scrub(s, p.cfg.APIKey) }
