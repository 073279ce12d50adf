package tools

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type recordingObserver struct {
	mu    sync.Mutex
	calls []string
}

func (o *recordingObserver) ToolCall(name string, isError bool, elapsed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	outcome := "ok"
	if isError {
		outcome = "error"
	}
	if elapsed <= 0 {
		outcome += " (no elapsed)"
	}
	o.calls = append(o.calls, name+" "+outcome)
}

func TestObserverSeesEveryCallWithBoundedNames(t *testing.T) {
	obs := &recordingObserver{}
	obj := `{"type":"object","properties":{"n":{"type":"integer"}}}`
	r := newTestRegistry(t, RegistryOptions{Observer: obs},
		&fakeTool{name: "good", params: obj},
		&fakeTool{name: "bad", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{}, errors.New("no")
		}},
	)
	for _, c := range []struct{ name, args string }{
		{"good", `{}`},
		{"bad", `{}`},
		{"good", `{"n":"not a number"}`},   // refused by the schema: an error of a known tool
		{"made_up_by_the_model_123", `{}`}, // not registered: reported as "unknown"
	} {
		r.Execute(context.Background(), call(c.name, c.args), Origin{})
	}
	r.Without("good").Execute(context.Background(), call("good", `{}`), Origin{}) // hidden in this view
	want := []string{"good ok", "bad error", "good error", "unknown error", "unknown error"}
	if !slices.Equal(obs.calls, want) {
		t.Errorf("observed %q, want %q", obs.calls, want)
	}
}
