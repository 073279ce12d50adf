package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// TestSetupViewInTheBrowser is the first run in a real headless Chromium:
// the gateway starts without a model key, the page opens on the setup view,
// a wrong key is refused by the live test, the right one is accepted, saved
// (0600, in the data dir, never shown back) and used at once: the first
// answer arrives in the browser without a restart.
func TestSetupViewInTheBrowser(t *testing.T) {
	g := newGW(t, setup{noTelegram: true})
	g.writeConfig(setup{noTelegram: true, apiKey: "${NB_TEST_SETUP_KEY_UNSET}"}, "")
	g.start()
	b := newBrowser(t)
	tok := webToken(g)

	b.do("log in", chromedp.Navigate(g.base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), tok), chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#setup-key")))
	if got := eval[string](b, `document.querySelector('#setup-hint').textContent`); !strings.Contains(got, "NB_TEST_SETUP_KEY_UNSET") {
		t.Errorf("setup hint %q does not name the missing variable", got)
	}
	if eval[bool](b, `!document.querySelector('#chat').hidden`) {
		t.Error("the chat shows beside the setup view")
	}

	b.do("test a wrong key", chromedp.SendKeys(chromedp.CSS("#setup-key"), "sk-wrong-0123456789"),
		chromedp.Click(chromedp.CSS("#setup-test")))
	b.until("the refusal", `document.querySelector('#setup-result').textContent.includes('refused')`)
	eval[bool](b, `(document.querySelector('#setup-key').value = '') === ''`)
	b.do("test the right key", chromedp.SendKeys(chromedp.CSS("#setup-key"), openaifake.DefaultAPIKey),
		chromedp.Click(chromedp.CSS("#setup-test")))
	b.until("the acceptance", `document.querySelector('#setup-result').textContent.includes('accepted the key')`)
	b.do("save", chromedp.Click(chromedp.CSS("#setup-save")), chromedp.WaitVisible(chromedp.CSS("#input")))
	if eval[bool](b, `!!document.querySelector('#setup')`) {
		t.Error("the setup view stays after saving")
	}
	if strings.Contains(eval[string](b, `document.documentElement.outerHTML`), openaifake.DefaultAPIKey) {
		t.Error("the page holds the key after saving")
	}

	path := filepath.Join(g.home, config.SecretsFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file %v, err %v; want mode 0600", fi, err)
	}
	saved, err := config.ReadOverlay(path)
	if err != nil || saved["providers.openai.api_key"] != openaifake.DefaultAPIKey {
		t.Errorf("secrets file holds %v (%v)", saved, err)
	}

	b.until("the stream", `document.querySelector('#transcript').dataset.ready === '1'`)
	g.script.Push(fakellm.Reply{Text: "My first answer, with the key from the page."})
	b.send("hello")
	b.until("the first answer", lastAssistant+`.includes('My first answer')`)
	g.waitReady(true)

	// A later start reads the key from the secrets file: no setup view.
	cfg, err := LoadConfig(g.configPath())
	if err != nil || cfg.Providers["openai"].APIKey != openaifake.DefaultAPIKey || cfg.ProviderProblem("openai") != "" {
		t.Errorf("reloaded config: key %q, problem %q, err %v", cfg.Providers["openai"].APIKey, cfg.ProviderProblem("openai"), err)
	}
}

// TestSetupViewTokenInTheBrowser: a bot token pasted in the setup view's
// chat channels part starts the channel at once; the page says so, and
// Telegram, down with a refused token, comes up without a restart.
func TestSetupViewTokenInTheBrowser(t *testing.T) {
	const fresh = "654321:the-token-just-made"
	g := newGW(t, setup{})
	g.writeConfig(setup{apiKey: "${NB_TEST_SETUP_KEY_UNSET}"}, "")
	g.tg.SetToken(fresh) // the configured token is refused
	g.start()
	tg := g.gateway.channels[slices.IndexFunc(g.gateway.channels, func(c *channelRun) bool { return c.name == "telegram" })]
	g.waitUntil("telegram down", func() bool { return tg.Healthy() != nil })
	b := newBrowser(t)
	b.do("log in", chromedp.Navigate(g.base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), webToken(g)), chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#setup-key")))
	b.do("paste the token", chromedp.Click(chromedp.CSS("#setup details summary")),
		chromedp.WaitVisible(chromedp.CSS("#setup-token")),
		chromedp.SendKeys(chromedp.CSS("#setup-token"), fresh), chromedp.Click(chromedp.CSS("#setup-token-save")))
	b.until("the page to say it is used now", `document.querySelector('#setup-token-result').textContent.includes('is starting with it now')`)
	g.waitUntil("telegram up with the new token", func() bool { return tg.Healthy() == nil })
}
