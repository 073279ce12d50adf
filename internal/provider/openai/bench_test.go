package openai_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider/openai"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

const benchChunks = 1000

// cannedTransport answers every request with the same SSE body from memory,
// so the benchmark measures the adapter (and go-openai's reader), not a server.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(c.body)),
		Request: r,
	}, nil
}

// openAIStream renders n small content chunks the way OpenAI sends them.
func openAIStream(n int) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,`
	b.WriteString(head + `"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, head+`"delta":{"content":"tok%03d "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i%1000)
	}
	b.WriteString(head + `"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1000,"total_tokens":1020}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkStream1000Chunks streams 1,000 small text chunks through the
// adapter. "memory" isolates the adapter; "loopback" adds real HTTP and the
// fake server (whose own allocations are counted too).
func BenchmarkStream1000Chunks(b *testing.B) {
	req := llm.Request{Model: "gpt-4o-mini", Messages: []llm.Message{llm.NewText(llm.RoleUser, "count")}}
	run := func(b *testing.B, p *openai.Provider) {
		b.ReportAllocs()
		for b.Loop() {
			var acc llm.Accumulator
			n := 0
			for d := range p.Stream(context.Background(), req) {
				if d.Kind == llm.DeltaText {
					n++
				}
				if err := acc.Add(d); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := acc.Message(); err != nil || n != benchChunks {
				b.Fatalf("err %v, %d text deltas", err, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunks), "ns/chunk")
	}
	b.Run("memory", func(b *testing.B) {
		client := &http.Client{Transport: cannedTransport{body: openAIStream(benchChunks)}}
		run(b, openai.New("bench", config.ProviderConfig{BaseURL: "http://bench.invalid/v1"}, client, zap.NewNop()))
	})
	b.Run("loopback", func(b *testing.B) {
		script := &fakellm.Script{Func: func(fakellm.Request) fakellm.Reply {
			return fakellm.Reply{Text: strings.Repeat("tok0000 ", benchChunks), Chunk: 8}
		}}
		fake := openaifake.New(b, script)
		tr := &http.Transport{}
		b.Cleanup(tr.CloseIdleConnections)
		cfg := config.ProviderConfig{APIKey: fake.APIKey(), BaseURL: fake.URL()}
		run(b, openai.New("bench", cfg, &http.Client{Transport: tr}, zap.NewNop()))
	})
}
