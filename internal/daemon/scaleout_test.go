package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
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
// process and two agent workers, sharing the workspace, with sessions in
// its files or in the JetStream stream. Every message of every chat is
// answered once, in order, and both workers take turns.
func TestScaleOutChannelsAndTwoWorkers(t *testing.T) {
	for _, sessions := range []string{config.SessionsSharedVolume, config.SessionsJetStream} {
		t.Run(sessions, func(t *testing.T) { testScaleOut(t, sessions) })
	}
}

func testScaleOut(t *testing.T, sessions string) {
	srv := natsfake.Start(t, t.TempDir())
	base := newGW(t, setup{})
	base.script.Func = func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "re: " + turnTag.FindString(r.LastUserText())}
	}
	base.writeConfig(setup{agents: "max_concurrent_turns: 2", telegram: `allow_from: ["*"]`}, fmt.Sprintf(
		"bus:\n  backend: nats\n  nats: {url: %q, partitions: 8, ack_wait: 2s, sessions: %s}\n", srv.URL(), sessions))
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
	if sessions != config.SessionsJetStream {
		return
	}
	// Every session is in the stream, each user message once, in order;
	// none is in the workspace.
	if files, _ := filepath.Glob(filepath.Join(base.cfg.Agents.Workspace, "sessions", "*")); len(files) != 0 {
		t.Errorf("session files with sessions: jetstream: %v", files)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store := jsstore.New(base.cfg.Bus.NATS, jsstore.ConnFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil }),
		jsstore.Options{}, zaptest.NewLogger(t))
	defer func() { _ = store.Close() }()
	list, err := store.List()
	if err != nil || len(list) != chats {
		t.Fatalf("stream lists %d sessions (%v), want %d", len(list), err, chats)
	}
	for c := range chats {
		key := fmt.Sprintf("telegram:%d", owner+int64(c))
		snap, err := store.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		var users []string
		for _, m := range snap.Messages {
			if m.Role == llm.RoleUser {
				users = append(users, turnTag.FindString(m.Text()))
			}
		}
		if got := strings.Join(users, "|"); got != "m0|m1|m2" {
			t.Errorf("%s holds user messages %q, want m0|m1|m2", key, got)
		}
	}
}
