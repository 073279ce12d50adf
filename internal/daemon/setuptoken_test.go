package daemon

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// A bot token pasted in the setup view applies without a restart (issue
// 39): the channel's supervisor builds the adapter anew from the config
// with the token and runs it, whether the channel was down for a refused
// token or for one whose variable is unset; the chat is then answered.
func TestSetupTokenAppliesWithoutARestart(t *testing.T) {
	const fresh = "654321:the-token-just-made"
	for _, start := range []string{"refused", "unset"} {
		t.Run(start, func(t *testing.T) {
			g := newGW(t, setup{})
			g.writeConfig(setup{telegram: "streaming: false"}, "")
			if start == "unset" {
				yaml, err := os.ReadFile(g.configPath())
				if err != nil {
					t.Fatal(err)
				}
				yaml = []byte(strings.Replace(string(yaml), fmt.Sprintf("token: %q", telegramfake.Token), "token: ${NANOBOT_TEST_UNSET_TG_TOKEN}", 1))
				if err := os.WriteFile(g.configPath(), yaml, 0o600); err != nil {
					t.Fatal(err)
				}
				if g.cfg, err = config.Load(g.configPath()); err != nil {
					t.Fatal(err)
				}
			}
			// BotFather issued a new token: the configured one is refused.
			g.tg.SetToken(fresh)
			g.start()
			tg := g.gateway.channels[slices.IndexFunc(g.gateway.channels, func(c *channelRun) bool { return c.name == "telegram" })]
			g.waitUntil("telegram down", func() bool { return tg.Healthy() != nil })

			res, err := webSetup{g.gateway}.Save(context.Background(), SetupInput{Channel: "telegram", Token: fresh})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(res.Applied, "channels.telegram.token") || len(res.Restart) != 0 {
				t.Errorf("Save = %+v; want the token applied, no restart", res)
			}
			g.waitUntil("telegram up with the new token", func() bool { return tg.Healthy() == nil })
			g.script.Push(fakellm.Reply{Text: "hello again"})
			g.tg.PushMessage(telegramfake.DM(owner, "are you back?"))
			g.waitLast(owner, "hello again")
		})
	}
}
