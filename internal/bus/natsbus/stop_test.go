package natsbus

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestWireCarriesStop: a final's stop reason crosses the NATS bus, so the
// API behind a split gateway answers the right finish_reason
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestWireCarriesStop(t *testing.T) {
	data, err := encodeOut(bus.OutboundMessage{Channel: "api", ChatID: "c", Kind: bus.KindFinal, Content: "half", Stop: llm.StopLength})
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeOut(data)
	if err != nil || m.Stop != llm.StopLength {
		t.Fatalf("decoded %+v, %v; want stop %q", m, err, llm.StopLength)
	}
}
