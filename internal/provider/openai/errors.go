package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// doer is the HTTP seam handed to go-openai for one call. It adds the
// configured extra headers and keeps the response header, which go-openai
// drops when it turns a failed response into an error, so Retry-After can
// still be read. One doer serves one call on one goroutine.
type doer struct {
	client *http.Client
	extra  map[string]string
	splice *splice // the request's cached parts, put into go-openai's envelope
	called bool
	header http.Header
	body   io.ReadCloser
	// ended is set when the stream ended as it should ("[DONE]"), so the
	// rest of the body is drained before it is closed.
	ended bool
}

// drainWait bounds how long the end of a finished stream's body is waited
// for (Provider.drainWait), and drainMax how much of it is read.
const (
	drainWait = 100 * time.Millisecond
	drainMax  = 4 << 10
)

// drain reads what is left of the body of a stream that has ended: go-openai
// stops at "[DONE]", and over HTTP/1 the body's last chunk may come in a
// later packet. A body closed before its end takes its connection with it,
// so the next call would dial again (to a real provider, with a new TLS
// handshake), as some did under load (docs/providers-openai.md). A server that
// sends more, or nothing, within wait loses the connection as before:
// cancel ends the read.
func (d *doer) drain(cancel context.CancelFunc, wait time.Duration) {
	if d.body == nil {
		return
	}
	t := time.AfterFunc(wait, cancel)
	_, _ = io.Copy(io.Discard, io.LimitReader(d.body, drainMax))
	t.Stop()
}

// closeBody closes the response body go-openai read but did not close when
// it turned a failure status into an error.
func (d *doer) closeBody() {
	if d.body != nil {
		_ = d.body.Close()
	}
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	if d.splice != nil {
		var err error
		if req, err = d.splice.apply(req); err != nil {
			return nil, err
		}
	}
	d.called = true
	for k, v := range d.extra {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if resp != nil {
		d.header, d.body = resp.Header, resp.Body
	}
	return resp, err
}

// callError classifies a failure of the request or of reading the stream.
// Cancellation by the caller is returned as ctx.Err() itself: it is not the
// provider's failure.
func (p *Provider) callError(parent, ctx context.Context, d *doer, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if cerr := ctx.Err(); cerr != nil {
		return p.timeoutError(cerr)
	}
	if !d.called {
		// go-openai refused the request before sending it (its own model
		// checks); retrying the same request cannot help.
		return fmt.Errorf("%s: build request: %w", p.name, err)
	}
	retry := httpcall.RetryAfterMs(d.header, time.Now())
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) {
		status := apiErr.HTTPStatusCode
		if status == 0 {
			status = statusFromCode(apiErr.Code)
		}
		typ := errorType(apiErr.Type, apiErr.Code)
		return &llm.APIError{
			Provider:   p.name,
			Status:     status,
			Type:       typ,
			Message:    p.scrub(apiErr.Message),
			RetryAfter: retry,
			Kind:       vocabulary.Kind(status, typ, apiErr.Message),
			Err:        err,
		}
	}
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) {
		// A failure status whose body is not OpenAI's error object (a proxy's
		// HTML page, a bare string from a compatible server).
		msg := strings.TrimSpace(string(httpcall.Clip(reqErr.Body, 300)))
		if msg == "" {
			msg = http.StatusText(reqErr.HTTPStatusCode)
		}
		return &llm.APIError{
			Provider:   p.name,
			Status:     reqErr.HTTPStatusCode,
			Message:    p.scrub(msg),
			RetryAfter: retry,
			Kind:       vocabulary.Kind(reqErr.HTTPStatusCode, "", msg),
			Err:        reqErr,
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: connection closed mid-stream: %w (%w)", p.name, llm.ErrTruncated, err)
	}
	return &llm.APIError{Provider: p.name, Type: "transport", Message: p.scrub(err.Error()), Err: err}
}

func (p *Provider) timeoutError(err error) error {
	return httpcall.Timeout(p.name, p.cfg.Timeout, err)
}

// bodyError converts the "error" member of a stream chunk. It may be OpenAI's
// object or, from some compatible servers, a bare string.
func (p *Provider) bodyError(raw json.RawMessage) error {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(httpcall.Clip(raw, 300))
		}
		e.Message = s
	}
	var code any
	if len(e.Code) > 0 {
		_ = json.Unmarshal(e.Code, &code) // best effort; the message is what matters
	}
	if f, ok := code.(float64); ok {
		code = int(f)
	}
	status, typ := statusFromCode(code), errorType(e.Type, code)
	return &llm.APIError{
		Provider: p.name,
		Status:   status,
		Type:     typ,
		Message:  p.scrub(e.Message),
		Kind:     vocabulary.Kind(status, typ, e.Message),
	}
}

// vocabulary is what the error types and codes of OpenAI and of the servers
// that speak its protocol mean in the failure table. Compatible servers and
// gateways also pass on the Messages API's types, so those are here too;
// most of them refuse a prompt over the context window only in words.
var vocabulary = httpcall.Vocabulary{
	Types: map[string]llm.Kind{
		"invalid_api_key": llm.KindAuth, "authentication_error": llm.KindAuth, "permission_error": llm.KindAuth,
		"insufficient_quota": llm.KindQuota, "billing_error": llm.KindQuota,
		"context_length_exceeded": llm.KindTooLong,
		"rate_limit_error":        llm.KindRateLimit, "rate_limit_exceeded": llm.KindRateLimit,
		"server_error": llm.KindUnavailable, "api_error": llm.KindUnavailable, "overloaded_error": llm.KindUnavailable,
		"invalid_request_error": llm.KindRejected, "not_found_error": llm.KindRejected, "request_too_large": llm.KindRejected,
	},
	TooLong: []string{"context length", "context_length", "context window", "maximum context", "prompt is too long"},
}

// statusFromCode reads an HTTP status some servers (OpenRouter) put in the
// error's code when the error arrives inside a 200 stream.
func statusFromCode(code any) int {
	if n, ok := code.(int); ok && n >= 400 && n < 600 {
		return n
	}
	return 0
}

func errorType(typ string, code any) string {
	if typ != "" {
		return typ
	}
	if s, ok := code.(string); ok {
		return s
	}
	return ""
}

// scrub removes the API key from text a server echoed back.
func (p *Provider) scrub(s string) string { return httpcall.Scrub(s, p.cfg.APIKey) }
