package daemon

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// /healthz, /readyz and /metrics of the whole gateway, with the Telegram link
// cut and restored and the model failing and recovering.

func TestReadinessFollowsTelegramAndMetricsCountATurn(t *testing.T) {
	s := setup{telegram: "poll_timeout: 1s\nstreaming: false"}
	g := newGW(t, s)
	link := fakes.NewOutage(t, g.tgURL)
	g.tgURL = link.URL()
	g.writeConfig(s, "")
	g.start()
	tg, script := g.tg, g.script

	if code, body := g.get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	r := g.waitReady(true)
	if names := checkNames(r); names != "telegram,provider openai,model" {
		t.Errorf("checks = %s, want telegram and model", names)
	}

	link.Down()
	r = g.waitReady(false)
	if failing := failingChecks(r); !strings.HasPrefix(failing, "telegram: ") {
		t.Errorf("failing checks while Telegram is away = %q", failing)
	}
	if code, body := g.get("/metrics"); code != 200 || !strings.Contains(body, `nanobot_channel_up{channel="telegram"} 0`) {
		t.Errorf("/metrics does not show telegram down:\n%s", grep(body, "channel_up"))
	}
	link.Up()
	g.waitReady(true)

	script.Push(fakellm.Reply{Text: "Hello there!", InputTokens: 120, OutputTokens: 7})
	tg.PushMessage(models.Message{Chat: models.Chat{ID: owner, Type: models.ChatTypePrivate},
		From: &models.User{ID: owner, FirstName: "U"}, Text: "hi"})
	tg.Wait(t, "the answer", func() bool { return len(tg.Visible(owner)) == 1 })

	// The final is sent before the turn's bookkeeping ends: poll.
	want := []string{
		`nanobot_turns_total{outcome="answered"} 1`,
		`nanobot_llm_calls_total{outcome="ok",route="openai/gpt-4o-mini"} 1`,
		`nanobot_llm_tokens_total{kind="input",model="openai/gpt-4o-mini",route="openai/gpt-4o-mini"} 120`,
		`nanobot_llm_tokens_total{kind="output",model="openai/gpt-4o-mini",route="openai/gpt-4o-mini"} 7`,
		`nanobot_turn_duration_seconds_count{outcome="answered"} 1`,
		`nanobot_llm_call_duration_seconds_count{route="openai/gpt-4o-mini"} 1`,
		`nanobot_channel_calls_total{channel="telegram",op="send",outcome="ok"} 1`,
		`nanobot_channel_up{channel="telegram"} 1`,
		`nanobot_bus_queue_depth{queue="inbound"} 0`,
		`nanobot_sessions_cached 1`,
		`nanobot_build_info{goversion="` + runtime.Version() + `",version="test"} 1`,
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := g.get("/metrics")
		missing := missingLines(body, want)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks:\n%s\nnanobot metrics:\n%s", strings.Join(missing, "\n"), grep(body, "nanobot_"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := g.stop(); err != nil {
		t.Errorf("gateway: %v", err)
	}
	if resp, err := g.client.Get(g.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("the listener still answers after Run returned")
	}
}

// A quiet bot: no message arrives, so Telegram's long poll only returns
// after poll_timeout (30 s) and Discord sends nothing after READY. /readyz
// answers 200 as soon as both are connected, while that long poll is still
// pending.
func TestReadyBeforeTheFirstLongPollReturns(t *testing.T) {
	g := startWith(t, setup{discord: true, telegram: "poll_timeout: 30s"})
	g.tg.Wait(t, "a long poll in flight", func() bool { return g.tg.LongPolls() == 1 })
	r := g.waitReady(true)
	if names := checkNames(r); names != "telegram,discord,provider openai,model" {
		t.Errorf("checks = %s, want telegram, discord and model", names)
	}
	for _, c := range g.tg.Calls("getUpdates") {
		if c.Params["timeout"] != "0" {
			t.Fatalf("a long poll returned (%v): the test no longer shows readiness before it", c.Params)
		}
	}
}

func TestModelFailureMakesItUnreadyUntilACallSucceeds(t *testing.T) {
	g := startWith(t, setup{agents: "fallbacks: []", telegram: "poll_timeout: 1s\nstreaming: false"})
	tg, script := g.tg, g.script
	g.waitReady(true)

	say := func(text string) {
		tg.PushMessage(models.Message{Chat: models.Chat{ID: owner, Type: models.ChatTypePrivate},
			From: &models.User{ID: owner, FirstName: "U"}, Text: text})
	}
	script.Push(fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded"})
	say("one")
	tg.Wait(t, "the error reply", func() bool { return len(tg.Visible(owner)) == 1 })
	r := g.waitReady(false)
	if failing := failingChecks(r); !strings.HasPrefix(failing, "model: the last model call") || !strings.Contains(failing, "503") {
		t.Errorf("failing checks = %q, want the model's 503", failing)
	}
	script.Push(fakellm.Reply{Text: "fine again"})
	say("two")
	g.waitReady(true)
}

func checkNames(r health.Report) string {
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func failingChecks(r health.Report) string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Error)
		}
	}
	return strings.Join(out, "; ")
}

func missingLines(body string, want []string) []string {
	var missing []string
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			missing = append(missing, w)
		}
	}
	return missing
}

func grep(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// /status tells the chat why the model is failing, in a few safe words,
// and stops once a call succeeds.
func TestStatusSaysWhyTheModelFails(t *testing.T) {
	g := startWith(t, setup{agents: "fallbacks: []", telegram: "poll_timeout: 1s\nstreaming: false"})
	say := func(text string) {
		g.tg.PushMessage(models.Message{Chat: models.Chat{ID: owner, Type: models.ChatTypePrivate},
			From: &models.User{ID: owner, FirstName: "U"}, Text: text})
	}
	g.script.Push(fakellm.Reply{Status: 503, ErrorType: "server_error", ErrorMessage: "overloaded"})
	say("one")
	g.visible(owner, 1)
	say("/status")
	status := g.visible(owner, 2)[1]
	if !strings.Contains(status, "Model provider: the last call, ") || !strings.Contains(status, "failed: the model provider is having trouble — openai answered HTTP 503") {
		t.Errorf("/status = %q, want the provider's 503", status)
	}
	g.script.Push(fakellm.Reply{Text: "fine again"})
	say("two")
	g.waitLast(owner, "fine again")
	say("/status")
	if status := g.visible(owner, 4)[3]; strings.Contains(status, "Model provider:") {
		t.Errorf("/status after a success still reports a failure: %q", status)
	}
}
