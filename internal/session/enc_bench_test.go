package session

import (
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// BenchmarkEncodeMessage is the store's cost to encode a turn's two plain
// messages and read them back, without the write: the fast path, and
// encoding/json plus the decoder it replaces.
func BenchmarkEncodeMessage(b *testing.B) {
	stamp := time.Date(2026, 11, 26, 21, 4, 5, 123456789, time.UTC)
	turn := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Could you remind me what we said about the trip to Lisbon next week? I think it was Tuesday.")}, Time: stamp,
			Meta: &llm.Meta{MessageIDs: []string{"12345"}}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Noted, I will keep that in mind. Anything else you want me to look at today?")}, Time: stamp,
			Meta: &llm.Meta{Route: "default", Provider: "openai", API: "openai", Model: "gpt-4o", StopReason: "stop", Usage: llm.Usage{InputTokens: 7012, OutputTokens: 18}}},
	}
	b.Run("plain", func(b *testing.B) {
		e := newEncoder()
		for b.Loop() {
			e.buf.Reset()
			if _, err := e.messages(turn, stamp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		e := newEncoder()
		for b.Loop() {
			e.buf.Reset()
			for _, m := range turn {
				if err := e.enc.Encode(m); err != nil {
					b.Fatal(err)
				}
				if _, err := decodeMessage(e.buf.Bytes()); err != nil {
					b.Fatal(err)
				}
				e.buf.Reset()
			}
		}
	})
}
