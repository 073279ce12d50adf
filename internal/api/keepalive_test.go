package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
)

// TestQuietStreamSendsKeepAliveComments plays the agent by hand: while the
// turn says nothing, the stream carries SSE comments, and the answer still
// ends it normally.
func TestQuietStreamSendsKeepAliveComments(t *testing.T) {
	b := bus.New(4)
	s := New(config.APIConfig{Keys: map[string]string{"k": "sk-keepalive-0123456789"}, RatePerMinute: 60, Burst: 5,
		MaxConcurrent: 2, MaxBodyBytes: 1 << 16, TurnTimeout: time.Minute}, Deps{Bus: b}, zaptest.NewLogger(t))
	s.keepAlive = time.Millisecond
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"nanobot","stream":true,"messages":[{"role":"user","content":"think long"}]}`))
	req.Header.Set("Authorization", "Bearer sk-keepalive-0123456789")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	in := <-b.Inbound()
	lines := bufio.NewScanner(resp.Body)
	comments := 0
	for comments < 3 && lines.Scan() {
		if lines.Text() == ": keep-alive" {
			comments++
		}
	}
	if comments < 3 {
		t.Fatalf("stream ended after %d keep-alive comments: %v", comments, lines.Err())
	}
	s.Receive(bus.OutboundMessage{Channel: Channel, ChatID: in.ChatID, Kind: bus.KindFinal, TurnID: "t", Content: "done"})
	var sawContent, sawDone bool
	for lines.Scan() {
		sawContent = sawContent || strings.Contains(lines.Text(), `"content":"done"`)
		sawDone = sawDone || lines.Text() == "data: [DONE]"
	}
	if !sawContent || !sawDone {
		t.Errorf("after the comments: content %v, [DONE] %v", sawContent, sawDone)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Run(ctx)
}
