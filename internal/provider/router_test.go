package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestRouter(t *testing.T, script *fakellm.Script) *Router {
	t.Helper()
	return NewRouter(
		map[string]Streamer{"openai": &fakellm.Streamer{Name: "openai", Script: script}},
		Options{
			Default: "openai/gpt-4o-mini",
			Routes:  map[string]RouteSpec{"smart": {Model: "openai/gpt-4.1", ContextWindow: 50_000, MaxTokens: 1000}},
		},
		zaptest.NewLogger(t))
}

func TestResolve(t *testing.T) {
	r := NewRouter(
		map[string]Streamer{"openai": &fakellm.Streamer{}, "ollama": &fakellm.Streamer{}},
		Options{
			Default:       "openai/gpt-4o-mini",
			ContextWindow: 64_000,
			Routes: map[string]RouteSpec{
				"smart": {Model: "openai/gpt-4.1", ContextWindow: 50_000, MaxTokens: 1000},
				"local": {Model: "ollama/my-finetune"},
			},
		},
		zaptest.NewLogger(t))
	tests := []struct {
		in      string
		want    Route
		wantErr bool
	}{
		{"", Route{Name: "openai/gpt-4o-mini", Provider: "openai", Model: "gpt-4o-mini", ContextWindow: 128_000}, false},
		// The route's own context_window wins over the table.
		{"smart", Route{Name: "smart", Provider: "openai", Model: "gpt-4.1", ContextWindow: 50_000, MaxTokens: 1000}, false},
		// A model the table does not know gets agents.context_window.
		{"local", Route{Name: "local", Provider: "ollama", Model: "my-finetune", ContextWindow: 64_000}, false},
		{"ollama/llama3.1:8b", Route{Name: "ollama/llama3.1:8b", Provider: "ollama", Model: "llama3.1:8b", ContextWindow: 128_000}, false},
		{"openai/meta-llama/llama-3-70b", Route{Name: "openai/meta-llama/llama-3-70b", Provider: "openai", Model: "meta-llama/llama-3-70b", ContextWindow: 128_000}, false},
		{"anthropic/claude", Route{}, true},
		{"nonsense", Route{}, true},
		{"openai/", Route{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := r.Resolve(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrUnknownRoute) {
					t.Fatalf("err = %v, want ErrUnknownRoute", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Provider != tt.want.Provider || got.Model != tt.want.Model ||
				got.ContextWindow != tt.want.ContextWindow || got.MaxTokens != tt.want.MaxTokens {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := r.Routes(); !slices.Equal(got, []string{"local", "openai/gpt-4o-mini", "smart"}) {
		t.Errorf("Routes() = %v", got)
	}
	if got := r.ContextWindow("nonsense"); got != defaultContextWindow {
		t.Errorf("ContextWindow of an unknown route = %d", got)
	}
}

func TestCompleteRecordsRoute(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Text: "hello there"})
	r := newTestRouter(t, script)
	var seen int
	msg, err := r.Complete(context.Background(), "smart", llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}, func(llm.Delta) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "hello there" || msg.Meta.Route != "smart" || msg.Meta.Provider != "openai" || msg.Meta.API != "fake" || msg.Meta.Model != "gpt-4.1" {
		t.Errorf("msg = %q meta %+v", msg.Text(), msg.Meta)
	}
	if seen == 0 {
		t.Error("onDelta never called")
	}
	if reqs := script.Requests(); reqs[0].Model != "gpt-4.1" || reqs[0].MaxTokens != 1000 {
		t.Errorf("request model %q max_tokens %d", reqs[0].Model, reqs[0].MaxTokens)
	}
}

func TestContextWindowTable(t *testing.T) {
	tests := map[string]int{
		"gpt-4o-mini": 128_000, "gpt-4.1-mini": 1_047_576, "gpt-4": 8_192, "claude-sonnet-4-5": 200_000,
		"anthropic/claude-3-haiku": 200_000, "o1-mini": 128_000, "o3": 200_000, "something-new": defaultContextWindow,
	}
	for model, want := range tests {
		if got := ContextWindow(model); got != want {
			t.Errorf("ContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}

// fallbackRig is a router over two in-process fake providers: "primary"
// (route openai-ish primary/model-a with fallback backup/model-b) and
// "backup".
type fallbackRig struct {
	router          *Router
	clock           *fakeClock
	primary, backup *fakellm.Script
	starts          int // DeltaStarts onDelta saw
}

func newFallbackRig(t *testing.T, retries int, edit func(*Options)) *fallbackRig {
	t.Helper()
	rig := &fallbackRig{clock: newFakeClock(), primary: &fakellm.Script{}, backup: &fakellm.Script{}}
	opts := Options{
		Default:          "primary/model-a",
		DefaultFallbacks: []string{"backup/model-b"},
		MaxRetries:       map[string]int{"primary": retries, "backup": 0},
		Retry:            RetryPolicy{BaseDelay: time.Second, MaxDelay: 8 * time.Second, MaxWait: 30 * time.Second},
		Breaker:          BreakerPolicy{Failures: 3, Cooldown: time.Minute},
		Clock:            rig.clock,
		Jitter:           halfJitter,
	}
	if edit != nil {
		edit(&opts)
	}
	rig.router = NewRouter(map[string]Streamer{
		"primary": &fakellm.Streamer{Name: "primary", Script: rig.primary},
		"backup":  &fakellm.Streamer{Name: "backup", Script: rig.backup},
	}, opts, zaptest.NewLogger(t))
	return rig
}

func (rig *fallbackRig) complete(ctx context.Context) (llm.Message, error) {
	return rig.router.Complete(ctx, "", llm.Request{Messages: []llm.Message{llm.NewText(llm.RoleUser, "hi")}}, func(d llm.Delta) {
		if d.Kind == llm.DeltaStart {
			rig.starts++
		}
	})
}

func TestCompleteRetriesAndFallsBack(t *testing.T) {
	tests := []struct {
		name      string
		retries   int
		primary   []fakellm.Reply
		backup    []fakellm.Reply
		wantText  string
		wantProv  string
		wantWaits []time.Duration
		wantCalls [2]int // primary, backup
		wantErr   func(error) bool
	}{
		{
			name:    "429 then 500 retried, then the fallback answers",
			retries: 1,
			primary: []fakellm.Reply{{Status: 429, ErrorType: "rate_limit_error"}, {Status: 500}},
			backup:  []fakellm.Reply{{Text: "from backup"}},
			// one backoff: half of the 1s ceiling
			wantText: "from backup", wantProv: "backup", wantWaits: []time.Duration{500 * time.Millisecond}, wantCalls: [2]int{2, 1},
		},
		{
			name:     "backoff doubles and is capped",
			retries:  5,
			primary:  []fakellm.Reply{{Status: 503}, {Status: 502}, {Status: 500}, {Status: 529, ErrorType: "overloaded_error"}, {Status: 500}, {Text: "finally"}},
			wantText: "finally", wantProv: "primary",
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second},
			wantCalls: [2]int{6, 0},
		},
		{
			name:     "Retry-After honoured exactly",
			retries:  2,
			primary:  []fakellm.Reply{{Status: 429, RetryAfter: "7"}, {Status: 429, RetryAfter: "0.25"}, {Text: "after waiting"}},
			wantText: "after waiting", wantProv: "primary",
			wantWaits: []time.Duration{7 * time.Second, 250 * time.Millisecond}, wantCalls: [2]int{3, 0},
		},
		{
			name:     "Retry-After longer than the max wait moves on at once",
			retries:  3,
			primary:  []fakellm.Reply{{Status: 429, RetryAfter: "3600"}},
			backup:   []fakellm.Reply{{Text: "no waiting"}},
			wantText: "no waiting", wantProv: "backup", wantCalls: [2]int{1, 1},
		},
		{
			name:     "a truncated stream is retried, then falls back",
			retries:  1,
			primary:  []fakellm.Reply{{Text: "partial answer that is cut", Truncate: true}, {Text: "cut again", Truncate: true}},
			backup:   []fakellm.Reply{{Text: "whole answer"}},
			wantText: "whole answer", wantProv: "backup", wantWaits: []time.Duration{500 * time.Millisecond}, wantCalls: [2]int{2, 1},
		},
		{
			name:     "an exhausted quota falls back without retrying",
			retries:  3,
			primary:  []fakellm.Reply{{Status: 429, ErrorType: "insufficient_quota", ErrorMessage: "You exceeded your current quota"}},
			backup:   []fakellm.Reply{{Text: "paid by backup"}},
			wantText: "paid by backup", wantProv: "backup", wantCalls: [2]int{1, 1},
		},
		{
			name:     "an empty answer is asked once more at once",
			retries:  2,
			primary:  []fakellm.Reply{{}, {Text: "second try"}},
			wantText: "second try", wantProv: "primary", wantCalls: [2]int{2, 0},
		},
		{
			name:     "empty twice (thinking only), then the fallback answers",
			retries:  2,
			primary:  []fakellm.Reply{{Thinking: "hmm"}, {}},
			backup:   []fakellm.Reply{{Text: "from backup"}},
			wantText: "from backup", wantProv: "backup", wantCalls: [2]int{2, 1},
		},
		{
			name:     "a malformed call is asked once more, then falls back",
			retries:  3,
			primary:  []fakellm.Reply{{Stop: llm.StopMalformedCall}, {Stop: llm.StopMalformedCall}},
			backup:   []fakellm.Reply{{Text: "called nothing"}},
			wantText: "called nothing", wantProv: "backup", wantCalls: [2]int{2, 1},
		},
		{
			name:     "max_retries 0: no second ask, straight to the fallback",
			retries:  0,
			primary:  []fakellm.Reply{{}},
			backup:   []fakellm.Reply{{Text: "from backup"}},
			wantText: "from backup", wantProv: "backup", wantCalls: [2]int{1, 1},
		},
		{
			name:      "empty everywhere: an AnswerError",
			retries:   1,
			primary:   []fakellm.Reply{{}, {}},
			backup:    []fakellm.Reply{{}},
			wantCalls: [2]int{2, 1},
			wantErr: func(err error) bool {
				var ae *llm.AnswerError
				return errors.As(err, &ae)
			},
		},
		{
			name:     "a cut answer is an answer: no retry",
			retries:  2,
			primary:  []fakellm.Reply{{Thinking: "long", Stop: llm.StopLength}},
			wantProv: "primary", wantCalls: [2]int{1, 0},
		},
		{
			name:     "a refusal is an answer: no retry, no fallback",
			retries:  2,
			primary:  []fakellm.Reply{{Stop: llm.StopRefusal}},
			wantProv: "primary", wantCalls: [2]int{1, 0},
		},
		{
			name:      "auth error: no retry, no fallback",
			retries:   3,
			primary:   []fakellm.Reply{{Status: 401, ErrorType: "authentication_error", ErrorMessage: "invalid x-api-key"}},
			wantCalls: [2]int{1, 0},
			wantErr: func(err error) bool {
				var api *llm.APIError
				return errors.As(err, &api) && api.Auth() && !errors.Is(err, ErrCircuitOpen)
			},
		},
		{
			name:      "validation error: no retry, no fallback",
			retries:   3,
			primary:   []fakellm.Reply{{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "messages: roles must alternate"}},
			wantCalls: [2]int{1, 0},
			wantErr: func(err error) bool {
				var api *llm.APIError
				return errors.As(err, &api) && api.Status == 400
			},
		},
		{
			name:      "every route fails: both errors reported",
			retries:   0,
			primary:   []fakellm.Reply{{Status: 500, ErrorMessage: "primary down"}},
			backup:    []fakellm.Reply{{Status: 503, ErrorMessage: "backup down"}},
			wantCalls: [2]int{1, 1},
			wantErr: func(err error) bool {
				var api *llm.APIError
				return errors.As(err, &api) && api.Retryable() && containsAll(err.Error(), "primary down", "backup down")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig := newFallbackRig(t, tt.retries, nil)
			rig.primary.Push(tt.primary...)
			rig.backup.Push(tt.backup...)
			msg, err := rig.complete(context.Background())
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				if len(msg.Parts) != 0 {
					t.Errorf("failed call returned a message")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if err == nil {
				if msg.Text() != tt.wantText || msg.Meta.Provider != tt.wantProv || msg.Meta.Route != "primary/model-a" {
					t.Errorf("answer %q from %+v", msg.Text(), msg.Meta)
				}
			}
			if got := rig.clock.Waits(); !slices.Equal(got, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tt.wantWaits)
			}
			calls := [2]int{len(rig.primary.Requests()), len(rig.backup.Requests())}
			if calls != tt.wantCalls {
				t.Errorf("calls (primary, backup) = %v, want %v", calls, tt.wantCalls)
			}
			if rig.starts != calls[0]+calls[1] {
				t.Errorf("onDelta saw %d starts for %d attempts", rig.starts, calls[0]+calls[1])
			}
			if reqs := rig.backup.Requests(); len(reqs) > 0 && reqs[0].Model != "model-b" {
				t.Errorf("fallback asked for model %q", reqs[0].Model)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestBreakerOpensAndHalfOpens(t *testing.T) {
	rig := newFallbackRig(t, 0, nil)
	rig.backup.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "backup"} }
	// Three calls: the primary fails each time, the backup answers.
	rig.primary.Push(fakellm.Reply{Status: 500}, fakellm.Reply{Status: 500}, fakellm.Reply{Status: 500})
	for i := 0; i < 3; i++ {
		if msg, err := rig.complete(context.Background()); err != nil || msg.Meta.Provider != "backup" {
			t.Fatalf("call %d: %v %+v", i, err, msg.Meta)
		}
	}
	// The circuit is open: the primary is not called at all.
	if msg, err := rig.complete(context.Background()); err != nil || msg.Meta.Provider != "backup" {
		t.Fatalf("open circuit: %v %+v", err, msg.Meta)
	}
	if n := len(rig.primary.Requests()); n != 3 {
		t.Fatalf("primary called %d times, want 3 (skipped while open)", n)
	}
	// After the cool-down one probe goes through; it fails, so it opens again.
	rig.clock.Advance(61 * time.Second)
	rig.primary.Push(fakellm.Reply{Status: 500})
	if _, err := rig.complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rig.primary.Requests()); n != 4 {
		t.Fatalf("primary called %d times, want 4 (one failed probe)", n)
	}
	// Next cool-down: the probe succeeds and the circuit closes.
	rig.clock.Advance(61 * time.Second)
	rig.primary.Push(fakellm.Reply{Text: "primary is back"}, fakellm.Reply{Text: "and stays"})
	for _, want := range []string{"primary is back", "and stays"} {
		msg, err := rig.complete(context.Background())
		if err != nil || msg.Text() != want {
			t.Fatalf("after recovery: %q %v", msg.Text(), err)
		}
	}
	// With no fallback, an open circuit is a clear error wrapping the cause.
	solo := newFallbackRig(t, 0, func(o *Options) { o.DefaultFallbacks = nil })
	solo.primary.Push(fakellm.Reply{Status: 503, ErrorMessage: "down"}, fakellm.Reply{Status: 503}, fakellm.Reply{Status: 503})
	for i := 0; i < 3; i++ {
		_, _ = solo.complete(context.Background())
	}
	_, err := solo.complete(context.Background())
	var api *llm.APIError
	if !errors.Is(err, ErrCircuitOpen) || !errors.As(err, &api) || api.Status != 503 {
		t.Fatalf("err = %v, want ErrCircuitOpen wrapping the 503", err)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	rig := newFallbackRig(t, 3, nil)
	rig.clock.block = true
	rig.primary.Push(fakellm.Reply{Status: 500})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rig.complete(ctx)
		done <- err
	}()
	<-rig.clock.sleeping // the router is waiting to retry
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after cancellation")
	}
	if n := len(rig.backup.Requests()); n != 0 {
		t.Errorf("fallback tried after cancellation (%d calls)", n)
	}
}

// The breaker counts failed calls, not attempts, so it never cuts a call's
// retries short; the half-open probe gets one attempt however many retries
// the provider allows.
func TestBreakerCountsCallsAndProbesOnce(t *testing.T) {
	rig := newFallbackRig(t, 2, nil)
	rig.backup.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "backup"} }
	rig.primary.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 502} }
	for i := 1; i <= 3; i++ {
		if _, err := rig.complete(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(rig.primary.Requests()); n != 3*i {
			t.Fatalf("after call %d: primary tried %d times, want %d (all retries used)", i, n, 3*i)
		}
	}
	if _, err := rig.complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rig.primary.Requests()); n != 9 {
		t.Fatalf("primary tried %d times while open", n)
	}
	rig.clock.Advance(time.Minute)
	if _, err := rig.complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rig.primary.Requests()); n != 10 {
		t.Fatalf("half-open probe made %d attempts, want 1", n-9)
	}
}

func TestCompleteConcurrent(t *testing.T) {
	rig := newFallbackRig(t, 1, nil)
	rig.primary.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 500} }
	rig.backup.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "backup"} }
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			msg, err := rig.router.Complete(context.Background(), "", llm.Request{}, nil)
			if err == nil && msg.Text() != "backup" {
				err = errors.New("answer " + msg.Text())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestFitIsAskedPerRoute: a request with Fit gets messages made for each
// route the router tries, with that route's window and reply cap, once per
// route (retries reuse them); a route whose circuit is open costs no fit.
func TestFitIsAskedPerRoute(t *testing.T) {
	primary, small := &fakellm.Script{}, &fakellm.Script{}
	primary.Push(fakellm.Reply{Status: 503}, fakellm.Reply{Status: 503})
	small.Push(fakellm.Reply{Text: "ok"})
	r := NewRouter(map[string]Streamer{
		"openai": &fakellm.Streamer{Name: "openai", Script: primary},
		"local":  &fakellm.Streamer{Name: "local", Script: small},
	}, Options{
		Default: "openai/gpt-4o", DefaultFallbacks: []string{"small"},
		Routes:     map[string]RouteSpec{"small": {Model: "local/tiny", ContextWindow: 16_384, MaxTokens: 512}},
		MaxRetries: map[string]int{"openai": 1, "local": 0},
		Clock:      &fakeClock{now: time.Unix(0, 0)}, Jitter: func(time.Duration) time.Duration { return 0 },
	}, zaptest.NewLogger(t))
	var asked []llm.Limits
	req := llm.Request{MaxTokens: 4096, Fit: func(l llm.Limits) []llm.Message {
		asked = append(asked, l)
		return []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(fmt.Sprintf("for %d", l.ContextWindow))}}}
	}}
	if _, err := r.Complete(t.Context(), "", req, nil); err != nil {
		t.Fatal(err)
	}
	want := []llm.Limits{{ContextWindow: 128_000, MaxTokens: 4096}, {ContextWindow: 16_384, MaxTokens: 512}}
	if !slices.Equal(asked, want) {
		t.Errorf("Fit asked for %v, want %v", asked, want)
	}
	for _, c := range []struct {
		script *fakellm.Script
		calls  int
		text   string
	}{{primary, 2, "for 128000"}, {small, 1, "for 16384"}} {
		reqs := c.script.Requests()
		if len(reqs) != c.calls {
			t.Fatalf("%d calls, want %d", len(reqs), c.calls)
		}
		for _, req := range reqs {
			if got := req.LastUserText(); got != c.text {
				t.Errorf("sent %q, want %q", got, c.text)
			}
		}
	}
}
