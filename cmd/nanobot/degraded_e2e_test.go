package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// withoutKey is the user's environment with OPENAI_API_KEY not set at all
// (a fresh shell that never exported it), plus extra.
func (e *env) withoutKey(extra ...string) []string {
	var out []string
	for _, v := range e.environ(extra...) {
		if !strings.HasPrefix(v, "OPENAI_API_KEY=") {
			out = append(out, v)
		}
	}
	return out
}

// runEnv runs the binary with vars as its whole environment.
func (e *env) runEnv(vars []string, args ...string) (string, string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = vars
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestCommandsWithoutAKey: every command that does not need the model runs
// without OPENAI_API_KEY (it used to stop all of them at loading the
// config); the one that needs it says which provider and which variable.
func TestCommandsWithoutAKey(t *testing.T) {
	e := newEnv(t)
	vars := e.withoutKey("NANOBOT_GATEWAY_LISTEN=" + freeAddr(t))
	for _, tc := range []struct {
		args     []string
		code     int
		want     string // in stdout or stderr
		wantNone string // in neither
	}{
		{[]string{"status"}, 0, "api key not set, DOWN: no API key: OPENAI_API_KEY is not set", "is not set (export it"},
		{[]string{"pairing", "list"}, 0, "", "OPENAI_API_KEY"},
		{[]string{"web", "token"}, 0, "", "OPENAI_API_KEY"},
		{[]string{"healthcheck"}, 1, "", "OPENAI_API_KEY"}, // no gateway runs: unhealthy, not a config error
		{[]string{"doctor"}, 1, "OPENAI_API_KEY is not set", ":-default"},
		{[]string{"agent", "-m", "hi"}, 1, "providers.openai: no API key: OPENAI_API_KEY is not set", ":-default"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, code := e.runEnv(vars, tc.args...)
			all := out + stderr
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, all)
			}
			if !strings.Contains(all, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, all)
			}
			if tc.wantNone != "" && strings.Contains(all, tc.wantNone) {
				t.Errorf("output has %q:\n%s", tc.wantNone, all)
			}
		})
	}
	if n := len(e.script.Requests()); n != 0 {
		t.Errorf("%d request(s) reached the provider without a key", n)
	}
}

// TestAgentWithARefusedKeyNamesTheFix: the chat user reads the short kind
// message; the operator at the terminal also reads which provider refused
// and which variable holds the key, as doctor names them.
func TestAgentWithARefusedKeyNamesTheFix(t *testing.T) {
	e := newEnv(t)
	out, stderr, code := e.runEnv(e.environ("OPENAI_API_KEY=sk-wrong-key-0123456789"), "agent", "-m", "hi")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "The model provider refused the API key") {
		t.Errorf("the answer lacks the kind message:\n%s", out)
	}
	for _, want := range []string{"providers.openai refused the API key", "OPENAI_API_KEY", "providers.openai.api_key"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(out+stderr, "sk-wrong-key-0123456789") {
		t.Error("the key was printed")
	}
}

// TestDoctorListsEveryFinding: a config with several problems gets every
// one listed, and the checks after the config still run.
func TestDoctorListsEveryFinding(t *testing.T) {
	e := newEnv(t)
	vars := e.withoutKey(doctorEnv(t, e,
		"NANOBOT_CHANNELS_TELEGRAM_TOKEN=bad",
		"NANOBOT_CHANNELS_DISCORD_ALLOW_FROM=",
		"NANOBOT_LOG_LEVEL=loud",
	)...)
	out, _, code := e.runEnv(vars, "doctor")
	if code != 1 {
		t.Fatalf("doctor exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"channels.telegram.token: is not a Telegram bot token",
		"channels.discord.allow_from: must not be empty",
		"log.level: must be one of",
		"OPENAI_API_KEY is not set",
		"workspace", "gateway.listen", "provider anthropic", "exec sandbox",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "[FAIL]  config"); n < 3 {
		t.Errorf("%d config findings, want one per problem:\n%s", n, out)
	}
}

// TestGatewayDegradedOverHTTP is the degraded gateway as a person sees it,
// against the real binary: no model key and a Telegram token Telegram
// refuses; the page and the probes answer, /readyz says 503 naming the
// provider, the variable and Telegram, Discord answers meanwhile (the API
// of the fake), and once Telegram accepts the token it comes up without a
// restart.
func TestGatewayDegradedOverHTTP(t *testing.T) {
	e := newEnv(t)
	tg := telegramfake.New(t)
	tg.SetToken("654321:another-bot-token")
	dc := discordfake.New(t, discordfake.Options{})
	owner := dc.NewUser("owner")
	vars := append(telegramEnv(tg, 7),
		"NANOBOT_CHANNELS_DISCORD_ENABLED=true",
		"NANOBOT_CHANNELS_DISCORD_TOKEN="+dc.Token(),
		"NANOBOT_CHANNELS_DISCORD_API_URL="+dc.URL(),
		"NANOBOT_CHANNELS_DISCORD_ALLOW_FROM="+owner.ID)
	p := e.startGatewayEnv(e.withoutKey(vars...))

	// The first-run line gives a one-time link straight to the setup view.
	waitUntil(t, "the first-run login link", 10*time.Second, func() bool {
		for _, l := range p.logLines() {
			if u, _ := l["url"].(string); strings.HasPrefix(l["msg"].(string), "no model key yet") && strings.Contains(u, "/#login=") {
				return true
			}
		}
		return false
	})
	if code, body, err := p.get("/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz = %d %q %v", code, body, err)
	}
	if code, body, err := p.get("/"); err != nil || code != 200 || !strings.Contains(body, "<title>nanobot</title>") {
		t.Fatalf("/ = %d %v", code, err)
	}
	var last string
	waitUntil(t, "/readyz to name the provider, its variable and telegram, with discord up", 20*time.Second, func() bool {
		code, body, err := p.get("/readyz")
		last = body
		if err != nil || code != 503 {
			return false
		}
		var r struct {
			Checks []struct {
				Name  string
				OK    bool
				Error string
			}
		}
		if json.Unmarshal([]byte(body), &r) != nil {
			return false
		}
		got := map[string]string{}
		for _, c := range r.Checks {
			if !c.OK {
				got[c.Name] = c.Error
			} else {
				got[c.Name] = "ok"
			}
		}
		return strings.Contains(got["provider openai"], "OPENAI_API_KEY is not set") &&
			strings.Contains(got["telegram"], "the bot token was refused") && got["discord"] == "ok"
	})
	if t.Failed() {
		t.Logf("last /readyz: %s", last)
	}
	if _, body, _ := p.get("/metrics"); !strings.Contains(body, `nanobot_provider_up{provider="openai"} 0`) ||
		!strings.Contains(body, `nanobot_channel_up{channel="telegram"} 0`) || !strings.Contains(body, `nanobot_channel_up{channel="discord"} 1`) {
		t.Errorf("metrics do not show the states:\n%s", grep(body, "_up{"))
	}

	// status shows each part up or down with the reason, from the gateway.
	listen := strings.TrimPrefix(p.base, "http://")
	out, stderr, code := e.runEnv(e.withoutKey(append(vars, "NANOBOT_GATEWAY_LISTEN="+listen)...), "status")
	for _, want := range []string{"DOWN: no API key: OPENAI_API_KEY is not set", "DOWN: the bot token was refused", "groups: mention, up"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status (exit %d) lacks %q:\n%s%s", code, want, out, stderr)
		}
	}

	// Discord serves meanwhile: a message gets the kind answer about the key.
	dm := dc.AddDM(owner)
	dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: owner, Content: "hi"})
	waitUntil(t, "discord to answer", 20*time.Second, func() bool {
		ms := dc.Messages(dm)
		return len(ms) > 0 && strings.Contains(ms[len(ms)-1].Content, "API key")
	})

	tg.SetToken(telegramfake.Token)
	waitUntil(t, "telegram up without a restart", 30*time.Second, func() bool {
		_, body, err := p.get("/readyz")
		return err == nil && strings.Contains(body, `{"name":"telegram","ok":true}`)
	})
	if p.done() {
		t.Fatalf("the gateway exited: %v", p.err)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
