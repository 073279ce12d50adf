package openai

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// A request body goes back for reuse only once every send that may read it
// has finished writing: the first send, and each retry or redirect that
// asked GetBody for it again.
func TestReleaseWaitsForEveryWrite(t *testing.T) {
	p := New("test", config.ProviderConfig{}, nil, zaptest.NewLogger(t))
	req := llm.Request{Model: "gpt-4o", System: strings.Repeat("system ", 2000), Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}
	wrote := func(r *http.Request) {
		httptrace.ContextClientTrace(r.Context()).WroteRequest(httptrace.WroteRequestInfo{})
	}
	tests := []struct {
		name    string
		sends   func(r *http.Request) // what net/http did with the request
		release bool
	}{
		{"never written (the dial failed)", func(*http.Request) {}, false},
		{"written", wrote, true},
		{"written, failed before the body (a write error is reported too)", func(r *http.Request) {
			httptrace.ContextClientTrace(r.Context()).WroteRequest(httptrace.WroteRequestInfo{Err: io.ErrClosedPipe})
		}, true},
		{"written, then a retry not yet written", func(r *http.Request) {
			wrote(r)
			if _, err := r.GetBody(); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"written, then a retry written", func(r *http.Request) {
			wrote(r)
			if _, err := r.GetBody(); err != nil {
				t.Fatal(err)
			}
			wrote(r)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hr, sp := splicedWith(t, p, req)
			tt.sends(hr)
			sp.release()
			if released := sp.body == nil; released != tt.release {
				t.Fatalf("released = %v, want %v (attempts %d, written %d)", released, tt.release, sp.attempts.Load(), sp.written.Load())
			}
		})
	}
}

// Over real HTTP, a finished call gives its body back and a later call
// takes it: the pool holds a body as large as the request after a call.
// (Under the race detector sync.Pool drops some of what it is given, so
// the test allows a few calls for one to be kept.)
func TestFinishedCallsReuseTheBody(t *testing.T) {
	fake := openaifake.New(t, nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := config.ProviderConfig{Kind: "openai", APIKey: fake.APIKey(), BaseURL: fake.URL()}
	p := New("test", cfg, &http.Client{Transport: tr}, zaptest.NewLogger(t))
	req := llm.Request{Model: "gpt-4o", System: strings.Repeat("a long system prompt ", 1500), Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}
	for i := range 20 {
		for d := range p.Stream(context.Background(), req) {
			if d.Kind == llm.DeltaError {
				t.Fatalf("call %d: %v", i, d.Err)
			}
		}
		if b, ok := p.enc.bodies.Get().(*[]byte); ok {
			if cap(*b) < 30000 || len(*b) != 0 {
				t.Fatalf("pooled body: len %d cap %d, want empty with room for the ~31 KB request", len(*b), cap(*b))
			}
			return
		}
	}
	t.Fatal("20 finished calls left no body for reuse")
}

// A stream that has ended keeps its connection for the next call even when
// the end of its body comes after "[DONE]": the rest is read before the body
// is closed, where closing it early would make net/http drop the connection.
// The fake holds the body open after [DONE] until the caller has the whole
// answer.
func TestFinishedStreamKeepsItsConnection(t *testing.T) {
	script := &fakellm.Script{}
	fake := openaifake.New(t, script)
	var dials atomic.Int64
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := config.ProviderConfig{Kind: "openai", APIKey: fake.APIKey(), BaseURL: fake.URL()}
	p := New("test", cfg, &http.Client{Transport: tr}, zaptest.NewLogger(t))
	p.drainWait = time.Minute // the end comes once the test has the answer; no timing is tested
	req := llm.Request{Model: "gpt-4o", Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}
	for i := range 3 {
		hold := make(chan struct{})
		script.Push(fakellm.Reply{Text: "hello there", HoldEnd: hold})
		var text string
		for d := range p.Stream(context.Background(), req) {
			switch d.Kind {
			case llm.DeltaText:
				text += d.Text
			case llm.DeltaError:
				t.Fatalf("call %d: %v", i, d.Err)
			case llm.DeltaDone:
				close(hold) // the answer is whole: now let the body end
			}
		}
		if text != "hello there" {
			t.Fatalf("call %d: text %q", i, text)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("3 calls dialled %d connections, want 1: a finished stream's connection was dropped", n)
	}
}
