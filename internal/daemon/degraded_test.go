package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// failing returns the error of check name in r, and whether it failed.
func failing(r health.Report, name string) (string, bool) {
	for _, c := range r.Checks {
		if c.Name == name && !c.OK {
			return c.Error, true
		}
	}
	return "", false
}

// TestGatewayStartsWithoutAKey: a key whose variable is unset is a degraded
// provider (docs/operations.md#readiness): the gateway serves, /readyz names the provider and the
// variable, a chat gets the short kind message at once (no request is sent
// without a key), and giving the provider a key in place makes it ready and
// answering without a restart.
func TestGatewayStartsWithoutAKey(t *testing.T) {
	g := newGW(t, setup{})
	g.writeConfig(setup{apiKey: "${NB_TEST_NO_KEY_UNSET}"}, "")
	g.start()

	if code, body := g.get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	// Telegram connects; only the provider stays down.
	var r health.Report
	g.waitUntil("telegram up", func() bool {
		r = g.waitReady(false)
		_, down := failing(r, "telegram")
		return !down
	})
	msg, down := failing(r, "provider openai")
	if !down || !strings.Contains(msg, "NB_TEST_NO_KEY_UNSET is not set") || !strings.Contains(msg, "providers.openai.api_key") {
		t.Errorf("readyz provider check = %q (down %v), want the variable and the key named", msg, down)
	}
	if _, body := g.get("/metrics"); !strings.Contains(body, `nanobot_provider_up{provider="openai"} 0`) {
		t.Errorf("metrics lack the provider down:\n%s", grepLines(body, "provider_up"))
	}

	g.tg.PushMessage(telegramfake.DM(owner, "hello"))
	g.waitPrefix(owner, "⚠️ The model provider refused the API key")
	if n := len(g.script.Requests()); n != 0 {
		t.Errorf("%d request(s) reached the provider without a key", n)
	}

	if err := g.gateway.core.Providers.SetKey(context.Background(), "openai", "sk-wrong-0123456789"); err == nil ||
		!strings.Contains(err.Error(), "refused") {
		t.Errorf("SetKey with a refused key = %v, want the refusal", err)
	}
	if err := g.gateway.core.Providers.SetKey(context.Background(), "openai", openaifake.DefaultAPIKey); err != nil {
		t.Fatalf("SetKey: %v", err)
	}
	g.script.Push(fakellm.Reply{Text: "Now I can answer."})
	g.tg.PushMessage(telegramfake.DM(owner, "hello again"))
	g.waitLast(owner, "Now I can answer.")
	r = g.waitReady(true)
	if _, down := failing(r, "provider openai"); down {
		t.Errorf("provider still down after the key: %+v", r)
	}
}

// TestRefusedKeyShowsOnReadyz: a key the provider refuses is found at start
// by the cheap probe (the model list), not by the first chat.
func TestRefusedKeyShowsOnReadyz(t *testing.T) {
	g := newGW(t, setup{})
	g.writeConfig(setup{apiKey: `"sk-wrong-key-0123456789"`}, "")
	g.start()
	// The probe runs beside the start; other checks may fail first.
	var msg string
	g.waitUntil("the provider down", func() bool {
		var down bool
		msg, down = failing(g.waitReady(false), "provider openai")
		return down
	})
	if !strings.Contains(msg, "the API key was refused") || !strings.Contains(msg, "providers.openai.api_key") {
		t.Errorf("readyz provider check = %q, want the refusal and the key named", msg)
	}
}

// TestRefusedTelegramTokenDegrades: a token Telegram refuses keeps only
// Telegram down, with the reason, while Discord and the listener serve; the
// token accepted later (reissued) brings it up without a restart.
func TestRefusedTelegramTokenDegrades(t *testing.T) {
	g := newGW(t, setup{discord: true})
	g.writeConfig(setup{discord: true}, "")
	g.tg.SetToken("654321:another-bot-token")
	g.start()

	g.waitUntil("telegram down with its reason, and discord up", func() bool {
		r := g.waitReady(false)
		msg, tgDown := failing(r, "telegram")
		_, dcDown := failing(r, "discord")
		return tgDown && strings.Contains(msg, "the bot token was refused") && !dcDown
	})
	g.script.Push(fakellm.Reply{Text: "Discord still answers."})
	g.dc.WaitReady(t, 1)
	dm := g.dc.AddDM(g.dcOwner)
	g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: g.dcOwner, Content: "hi"})
	g.dcWaitLast(dm, "Discord still answers.")

	g.tg.SetToken(telegramfake.Token)
	g.waitReady(true)
	g.script.Push(fakellm.Reply{Text: "Telegram is back."})
	g.tg.PushMessage(telegramfake.DM(owner, "hi"))
	g.waitLast(owner, "Telegram is back.")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
