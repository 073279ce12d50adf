package llm_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// closedAddr is a loopback address nothing listens on (the port was free a
// moment ago).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// get makes a real request and returns its error, wrapped as the provider
// adapters and the router wrap it.
func get(t *testing.T, url string) error {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s succeeded, want a network failure", url)
	}
	api := &llm.APIError{Provider: "openai", Type: "transport", Message: err.Error(), Err: err}
	return fmt.Errorf("every route failed: %w", errors.Join(fmt.Errorf("route openai/gpt-4o-mini: %w", api)))
}

func TestUnreachableSaysWhyInAShortSafeForm(t *testing.T) {
	closed := closedAddr(t)
	untrusted := httptest.NewTLSServer(http.NotFoundHandler()) // its certificate is not in the client's roots
	t.Cleanup(untrusted.Close)
	tlsHost := strings.TrimPrefix(untrusted.URL, "https://")
	tests := []struct {
		name string
		err  error
		want string // "" = not unreachable
	}{
		{"connection refused", get(t, "http://user:pw-secret@"+closed+"/v1/chat/completions?key=sk-secret"),
			"cannot reach " + closed + ": connection refused"},
		{"no such host", get(t, "https://api.nanobot-test.invalid/v1/chat/completions?key=sk-secret"),
			"cannot reach api.nanobot-test.invalid: no such host"},
		{"untrusted certificate", get(t, untrusted.URL+"/v1?key=sk-secret"),
			"cannot reach " + tlsHost + ": its TLS certificate is not trusted"},
		{"an HTTP answer", &llm.APIError{Provider: "openai", Status: 503, Message: "overloaded"}, ""},
		{"a cut stream", fmt.Errorf("openai: connection closed mid-stream: %w (%w)", llm.ErrTruncated, &net.OpError{Op: "read", Err: errors.New("reset")}), ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := llm.Unreachable(tt.err)
			if ok != (tt.want != "") || got != tt.want {
				t.Fatalf("Unreachable = %q, %v; want %q\nerror: %v", got, ok, tt.want, tt.err)
			}
			for _, secret := range []string{"sk-secret", "pw-secret", "/v1"} {
				if strings.Contains(got, secret) {
					t.Errorf("%q shows %q", got, secret)
				}
			}
		})
	}
}
