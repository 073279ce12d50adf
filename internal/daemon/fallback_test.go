package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// With the default route down, a fallback route is sent the history
// projected for its own window and reply cap, not the one made for the
// route that failed (docs/routing.md#routes): here a local model of 16k
// tokens behind a default of 128k, on a chat longer than 16k.
func TestFallbackGetsAProjectionForItsOwnWindow(t *testing.T) {
	const window = 16_384
	local := &fakellm.Script{ContextWindow: window, Tokens: estimate}
	localSrv := openaifake.New(t, local)
	g := newGW(t, setup{})
	s := setup{
		telegram: "streaming: false",
		agents:   "fallbacks: [small]",
		providers: fmt.Sprintf("local:\n  kind: openai\n  api_key: %q\n  base_url: %q\n  max_retries: 0\n",
			openaifake.DefaultAPIKey, localSrv.URL()),
	}
	g.writeConfig(s, fmt.Sprintf("routes:\n  small:\n    model: local/my-finetune\n    context_window: %d\n    max_tokens: 1024\n", window))
	g.start()

	// A long chat while the default route is up: five answers of about
	// 5,000 tokens each.
	essay := strings.Repeat("bees make honey and pollinate flowers ", 700)
	for i := range 5 {
		g.script.Push(fakellm.Reply{Text: fmt.Sprintf("part %d: %s", i, essay)})
		g.tg.PushMessage(telegramfake.DM(owner, fmt.Sprintf("tell me more, part %d", i)))
		g.waitUntil(fmt.Sprintf("answer %d", i), func() bool { return len(g.script.Requests()) == i+1 && g.script.Pending() == 0 })
		g.tg.Wait(t, fmt.Sprintf("answer %d shown", i), func() bool {
			return strings.Contains(strings.Join(g.tg.Visible(owner), "\n"), fmt.Sprintf("part %d:", i))
		})
	}
	if n := estimate(g.script.Requests()[4]); n <= window {
		t.Fatalf("the chat is only %d tokens; the test needs more than the fallback's %d", n, window)
	}

	// The default route goes down; the fallback answers, within its window.
	g.script.Func = func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "down for maintenance"}
	}
	local.Push(fakellm.Reply{Text: "From the small model: bees are busy."})
	g.tg.PushMessage(telegramfake.DM(owner, "sum it up"))
	g.waitLast(owner, "From the small model: bees are busy.")
	reqs := local.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the fallback was called %d times, want once", len(reqs))
	}
	if n := estimate(reqs[0]) + reqs[0].MaxTokens; n > window {
		t.Errorf("the fallback was sent %d tokens, more than its window of %d", n, window)
	}
	if reqs[0].MaxTokens != 1024 || !strings.HasSuffix(reqs[0].LastUserText(), "sum it up") {
		t.Errorf("fallback request: max_tokens %d, last user text %q", reqs[0].MaxTokens, reqs[0].LastUserText())
	}
}

// estimate counts a request's prompt with the agent's own token estimate,
// as the fallback's model counts it here.
func estimate(r fakellm.Request) int {
	n := 0
	r.Texts(func(s string) { n += history.EstimateText(s) })
	return n
}
