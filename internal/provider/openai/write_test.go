package openai_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// With a write buffer as large as the request (the daemon's model client
// has 64 KiB), a request leaves in one write: net/http sends the headers
// and an in-memory body together, and any other kind of body makes it
// flush the headers first and copy the body through a fresh 32 KiB buffer.
func TestRequestLeavesInOneWrite(t *testing.T) {
	fake := openaifake.New(t, nil)
	var writes atomic.Int64
	var d net.Dialer
	tr := &http.Transport{
		WriteBufferSize: 64 << 10,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &writes}, nil
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := config.ProviderConfig{Kind: "openai", APIKey: fake.APIKey(), BaseURL: fake.URL()}
	p := openai.New("test", cfg, &http.Client{Transport: tr}, zaptest.NewLogger(t))
	req := llm.Request{Model: "gpt-4o", System: strings.Repeat("a long system prompt ", 1500), Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}
	for i := range 3 {
		before := writes.Load()
		if r := collect(t, p.Stream(context.Background(), req)); r.err != nil {
			t.Fatal(r.err)
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("call %d: the ~30 KiB request took %d writes, want 1", i, n)
		}
	}
}
