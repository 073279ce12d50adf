package channels

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
)

type recordingReceiver struct {
	mu  sync.Mutex
	got []bus.OutboundMessage
}

func (r *recordingReceiver) Receive(m bus.OutboundMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
}

func TestReceiverGetsItsMessagesUnrenderedInOrderAndDeliveredIsCalled(t *testing.T) {
	src := make(chan bus.OutboundMessage, 8)
	m := NewManager(src, ManagerConfig{}, zaptest.NewLogger(t))
	rec := &recordingReceiver{}
	if err := m.RegisterReceiver("web", rec); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterReceiver("web", rec); err == nil {
		t.Fatal("a second RegisterReceiver of one name succeeded")
	}
	if err := m.Register(&fakeChannel{name: "web"}, testRenderer{limit: 40}, config.OutputConfig{}); err == nil {
		t.Fatal("Register of a name taken by a receiver succeeded")
	}
	var delivered sync.WaitGroup
	delivered.Add(3)
	for i, k := range []bus.Kind{bus.KindStart, bus.KindDraft, bus.KindFinal} {
		src <- bus.OutboundMessage{Channel: "web", ChatID: "c1", Kind: k, TurnID: "t",
			Content: string(rune('a'+i)) + " **md**", Delivered: delivered.Done}
	}
	close(src)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	delivered.Wait()
	if len(rec.got) != 3 {
		t.Fatalf("receiver got %d messages, want 3", len(rec.got))
	}
	for i, k := range []bus.Kind{bus.KindStart, bus.KindDraft, bus.KindFinal} {
		if rec.got[i].Kind != k || rec.got[i].Content != string(rune('a'+i))+" **md**" {
			t.Errorf("message %d = %v %q, want %v unrendered", i, rec.got[i].Kind, rec.got[i].Content, k)
		}
	}
}
