package gemini

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/geminifake"
)

// BenchmarkStream1000TextDeltas streams one answer of 1,000 text chunks over
// loopback HTTP through the adapter into an Accumulator. The stream is
// recorded once from the fake and replayed by a handler that only writes
// bytes, so allocs/op are the client side's (adapter + net/http).
func BenchmarkStream1000TextDeltas(b *testing.B) {
	body := recordStream(b, fakellm.Reply{Text: strings.Repeat("x", 8000), Chunk: 8})
	url, client := fakes.Replay(b, body)
	p := New("gemini", config.ProviderConfig{APIKey: "k", BaseURL: url}, client, zap.NewNop())
	req := ask("hello")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var acc llm.Accumulator
		texts := 0
		for d := range p.Stream(context.Background(), req) {
			if d.Kind == llm.DeltaText {
				texts++
			}
			if err := acc.Add(d); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := acc.Message(); err != nil || texts != 1000 {
			b.Fatalf("texts %d err %v", texts, err)
		}
	}
}

// recordStream returns the raw SSE body the fake sends for reply.
func recordStream(b *testing.B, reply fakellm.Reply) []byte {
	b.Helper()
	script := &fakellm.Script{}
	script.Push(reply)
	fake := geminifake.New(b, script)
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	req, err := http.NewRequest(http.MethodPost, fake.URL()+"/v1beta/models/m:streamGenerateContent?alt=sse", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", geminifake.APIKey)
	resp, err := fake.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte("finishReason")) {
		b.Fatalf("recording failed: status %d err %v", resp.StatusCode, err)
	}
	return raw
}
