package daemon

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
)

// startRole runs another gateway process on base's configuration, fakes and
// workspace, in role.
func startRole(base *gw, role string) *gw {
	base.t.Helper()
	g := *base
	g.role, g.cancel, g.done, g.client = role, nil, nil, nil
	g.log = base.log.Named(role)
	g.start()
	return &g
}

var turnTag = regexp.MustCompile(`m\d+`)

// The whole gateway split in three processes over NATS: one channels
// process and two agent workers, sharing the workspace. Every message of
// every chat is answered once, in order, and both workers take turns.
func TestScaleOutChannelsAndTwoWorkers(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	base := newGW(t, setup{})
	base.script.Func = func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "re: " + turnTag.FindString(r.LastUserText())}
	}
	base.writeConfig(setup{agents: "max_concurrent_turns: 2", telegram: `allow_from: ["*"]`}, fmt.Sprintf(
		"bus:\n  backend: nats\n  nats: {url: %q, partitions: 8, ack_wait: 2s}\n", srv.URL()))
	base.role = RoleChannels
	base.start()
	workers := []*gw{startRole(base, RoleAgent), startRole(base, RoleAgent)}
	for _, w := range workers {
		w.waitReady(true)
	}

	const chats, perChat = 6, 3
	for i := range perChat {
		for c := range chats {
			base.tg.PushMessage(telegramfake.DM(owner+int64(c), fmt.Sprintf("m%d", i)))
		}
	}
	for c := range chats {
		chat := owner + int64(c)
		base.visible(chat, perChat)
		want := "re: m0|re: m1|re: m2"
		base.waitUntil(fmt.Sprintf("chat %d answered in order", chat), func() bool {
			return strings.Join(base.tg.Visible(chat), "|") == want
		})
	}
	for i, w := range workers {
		_, body := w.get("/metrics")
		if !strings.Contains(body, `nanobot_nats_up{role="agent"} 1`) {
			t.Errorf("worker %d metrics lack nats_up", i)
		}
		if !regexp.MustCompile(`nanobot_turns_total\{outcome="answered"\} [1-9]`).MatchString(body) {
			t.Errorf("worker %d answered no turn", i)
		}
	}
	_, body := base.get("/readyz")
	if !strings.Contains(body, `"nats"`) {
		t.Errorf("/readyz of the channels process does not check nats: %s", body)
	}
}
