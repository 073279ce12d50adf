package channels

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
)

type recordingObserver struct {
	mu      sync.Mutex
	calls   []string
	replies []string
}

func (o *recordingObserver) PlatformCall(channel, op, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, channel+" "+op+" "+outcome)
}

func (o *recordingObserver) Reply(channel, kind, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.replies = append(o.replies, channel+" "+kind+" "+outcome)
}

func (o *recordingObserver) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

func TestObserverSeesEveryPlatformCall(t *testing.T) {
	tests := []struct {
		name  string
		fail  func(c call) error
		want  []string
		reply string // what Observer.Reply was told of the final
	}{
		{"delivered", func(call) error { return nil }, []string{"fake send ok"}, "fake final delivered"},
		{"markup refused then plain", func(c call) error {
			if !c.plain {
				return fmt.Errorf("can't parse entities: %w", ErrBadMarkup)
			}
			return nil
		}, []string{"fake send bad_markup", "fake send ok"}, "fake final delivered"},
		{"permanent", func(call) error { return &PermanentError{Err: errors.New("chat not found")} },
			[]string{"fake send permanent"}, "fake final failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &recordingObserver{}
			h := newHarness(t, config.OutputConfig{}, ManagerConfig{Observer: obs})
			h.ch.setFail(tt.fail)
			h.send(1, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "hello"})
			if got := obs.list(); !slices.Equal(got, tt.want) {
				t.Errorf("observed %q, want %q", got, tt.want)
			}
			obs.mu.Lock()
			replies := slices.Clone(obs.replies)
			obs.mu.Unlock()
			if want := []string{tt.reply}; !slices.Equal(replies, want) {
				t.Errorf("replies %q, want %q: a delivered answer must be told from a failed one", replies, want)
			}
		})
	}
}

func TestObserverSeesDraftEdits(t *testing.T) {
	obs := &recordingObserver{}
	h := newHarness(t, streaming, ManagerConfig{Observer: obs})
	h.send(2,
		bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"},
		bus.OutboundMessage{Kind: bus.KindDraft, TurnID: "t", Content: "draft"},
	)
	h.send(3, bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: "final"})
	want := []string{"fake typing ok", "fake send ok", "fake edit ok"}
	if got := obs.list(); !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q (typing, the draft's send, the final's edit)", got, want)
	}
}
