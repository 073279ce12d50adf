package anthropic

import (
	"context"
	"net"
	"net/http"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// The adapter keeps the network error in the chain, so the user is told the
// provider cannot be reached, and why.
func TestUnreachableEndpointIsNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	p := New("claude", config.ProviderConfig{Kind: "anthropic", APIKey: "sk-ant-test-0123456789", BaseURL: "http://" + closed},
		hc, zaptest.NewLogger(t))
	res := run(t, p, context.Background(), ask("hi"))
	reason, ok := llm.Unreachable(res.err)
	if want := "cannot reach " + closed + ": connection refused"; !ok || reason != want {
		t.Fatalf("Unreachable = %q, %v; want %q\nerror: %v", reason, ok, want, res.err)
	}
}
