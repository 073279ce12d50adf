package bustest

import (
	"context"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
)

func TestRecorderDeliversKeepsAndWaits(t *testing.T) {
	b := bus.New(4)
	r := Record(b)
	delivered := 0
	for _, m := range []bus.OutboundMessage{
		{ChatID: "a", Kind: bus.KindStart},
		{ChatID: "a", Kind: bus.KindFinal, Content: "one", Delivered: func() { delivered++ }},
		{ChatID: "b", Kind: bus.KindFinal, Content: "two"},
	} {
		if err := b.PublishOutbound(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	out := r.WaitFor(t, "two finals", func(out []bus.OutboundMessage) bool { return len(Finals(out, "")) == 2 })
	if got := Finals(out, "a"); len(got) != 1 || got[0].Content != "one" {
		t.Errorf("finals of a = %+v", got)
	}
	b.CloseOutbound()
	<-r.Done()
	if delivered != 1 || len(r.All()) != 3 {
		t.Errorf("delivered %d, kept %d; want 1 and 3", delivered, len(r.All()))
	}
}
