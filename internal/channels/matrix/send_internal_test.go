package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// TestClassify: what each failure tells the manager (the real server's
// M_LIMIT_EXCEEDED is also read in TestRateLimitIsTheServers).
func TestClassify(t *testing.T) {
	resp := func(code int, header http.Header) *http.Response {
		return &http.Response{StatusCode: code, Header: header}
	}
	matrixErr := func(code int, errcode string, extra map[string]any) error {
		re := &mautrix.RespError{ErrCode: errcode, StatusCode: code, ExtraData: extra}
		//lint:ignore bodyclose a made-up response, with no body to close
		return mautrix.HTTPError{Response: resp(code, http.Header{}), RespError: re}
	}
	for _, tc := range []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"M_LIMIT_EXCEEDED with retry_after_ms",
			matrixErr(429, "M_LIMIT_EXCEEDED", map[string]any{"retry_after_ms": float64(1500)}),
			func(err error) bool {
				var rl *channels.RateLimitError
				return errors.As(err, &rl) && rl.RetryAfter == 1500*time.Millisecond
			}},
		{"a bare 429 with Retry-After",
			//lint:ignore bodyclose a made-up response, with no body to close
			mautrix.HTTPError{Response: resp(429, http.Header{"Retry-After": {"3"}})},
			func(err error) bool {
				var rl *channels.RateLimitError
				return errors.As(err, &rl) && rl.RetryAfter == 3*time.Second
			}},
		{"a refused token is permanent and fatal",
			matrixErr(401, "M_UNKNOWN_TOKEN", nil),
			func(err error) bool {
				var pe *channels.PermanentError
				return errors.As(err, &pe) && errors.Is(err, channels.ErrTokenRefused) && errors.Is(err, errFatal)
			}},
		{"forbidden is permanent, not fatal",
			matrixErr(403, "M_FORBIDDEN", nil),
			func(err error) bool {
				var pe *channels.PermanentError
				return errors.As(err, &pe) && !errors.Is(err, errFatal)
			}},
		{"a 502 is transient",
			//lint:ignore bodyclose a made-up response, with no body to close
			mautrix.HTTPError{Response: resp(502, http.Header{})},
			func(err error) bool {
				var pe *channels.PermanentError
				var uo *channels.UnknownOutcomeError
				return !errors.As(err, &pe) && !errors.As(err, &uo)
			}},
		{"a timeout is an unknown outcome",
			mautrix.HTTPError{WrappedError: fmt.Errorf("do: %w", context.DeadlineExceeded)},
			func(err error) bool {
				var uo *channels.UnknownOutcomeError
				return errors.As(err, &uo)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify("op", tc.err); !tc.check(got) {
				t.Errorf("classify = %v (%T)", got, got)
			}
		})
	}
}
