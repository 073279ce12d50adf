package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// startRole runs another gateway process on base's configuration, fakes and
// workspace, in role.
func startRole(base *gw, role string) *gw {
	base.t.Helper()
	g := *base
	g.role, g.cancel, g.done, g.client, g.gateway = role, nil, nil, nil, nil
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
	// An upgrade: the owner's chat is still in the workspace's sessions/,
	// which the first process to start moves to the shared sessions dir.
	ownerKey := fmt.Sprintf("telegram:%d", owner)
	if sessions == config.SessionsSharedVolume {
		old := session.NewStore(filepath.Join(base.cfg.Agents.Workspace, "sessions"), session.Options{}, zaptest.NewLogger(t))
		if _, err := old.Append(ownerKey, llm.NewText(llm.RoleUser, "the door is blue"), llm.NewText(llm.RoleAssistant, "noted")); err != nil {
			t.Fatal(err)
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
	}
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
		if _, err := os.Lstat(filepath.Join(base.cfg.Agents.Workspace, "sessions")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the workspace's sessions/ was not moved: %v", err)
		}
		if msgs := base.sessionMessages(ownerKey); len(msgs) != 2+2*perChat || msgs[0].Text() != "the door is blue" {
			t.Errorf("%s: %d messages, want the moved two and the new turns", ownerKey, len(msgs))
		}
		return
	}
	// Every session is in the stream, each user message once, in order;
	// no session file is written.
	if files, _ := filepath.Glob(filepath.Join(base.cfg.Agents.SessionsDir, "*")); len(files) != 0 {
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
	store := jsstore.New(base.cfg.Bus.NATS, natsbus.JetStreamFunc(func(context.Context) (jetstream.JetStream, error) { return js, nil }),
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

var jobTag = regexp.MustCompile(`Scheduled job [0-9a-f]+`)

// cronLeaseTTL is the scheduler lease of TestScaleOutCronRunsOnceOnTheLeader.
// The leader gives it up when a renewal is two thirds of it late: at 1 s a
// loaded machine's stall moved the lead between the test's looks.
const cronLeaseTTL = 3 * time.Second

// Cron among split processes: the agent workers compete for the scheduler
// lease and only the leader runs the jobs. A job added through the other
// worker's scheduler (as its cron tool does) runs once; when the leader
// shuts down, the other worker takes over and runs the next job once.
func TestScaleOutCronRunsOnceOnTheLeader(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	base := newGW(t, setup{})
	base.script.Func = func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "ran " + jobTag.FindString(r.LastUserText())}
	}
	base.writeConfig(setup{}, fmt.Sprintf(
		"bus:\n  backend: nats\n  nats: {url: %q, partitions: 4, ack_wait: 2s, lease_ttl: %s}\n", srv.URL(), cronLeaseTTL))
	base.role = RoleChannels
	base.start()
	workers := []*gw{startRole(base, RoleAgent), startRole(base, RoleAgent)}
	for _, w := range workers {
		w.waitReady(true)
	}
	leader, other := electedOf(base, workers)
	for w, want := range map[*gw]string{leader: "1", other: "0"} {
		if _, body := w.get("/metrics"); !strings.Contains(body, "\nnanobot_scheduler_leader "+want+"\n") {
			t.Errorf("a worker's /metrics lacks nanobot_scheduler_leader %s", want)
		}
	}
	if _, body := base.get("/metrics"); strings.Contains(body, "nanobot_scheduler_leader") {
		t.Error("the channels process competes for the scheduler lease")
	}

	ranOnce(t, base, other, "first")
	if err := leader.stop(); err != nil {
		t.Fatalf("leader: %v", err)
	}
	base.waitUntil("the other worker to lead", other.gateway.lease.Leading)
	ranOnce(t, base, other, "second")
}

// electedOf waits until exactly one of workers holds the scheduler lease.
func electedOf(base *gw, workers []*gw) (leader, other *gw) {
	base.t.Helper()
	base.waitUntil("one worker to lead", func() bool {
		return workers[0].gateway.lease.Leading() != workers[1].gateway.lease.Leading()
	})
	if workers[0].gateway.lease.Leading() {
		return workers[0], workers[1]
	}
	return workers[1], workers[0]
}

// ranOnce adds a one-time job for the owner's chat through w's scheduler,
// due in a few seconds, and checks that its run is answered in the chat
// once, the model is asked once, and the job leaves the shared file.
func ranOnce(t *testing.T, base, w *gw, what string) {
	t.Helper()
	chat := schedule.Chat{Channel: "telegram", ChatID: fmt.Sprint(owner), SenderID: fmt.Sprint(owner),
		SessionKey: fmt.Sprintf("telegram:%d", owner), Metadata: map[string]string{"chat_type": "private"}}
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	j, err := w.gateway.cron.Add(chat, schedule.When{At: at}, "Remind the user of the "+what+" thing.")
	if err != nil {
		t.Fatalf("add the %s job: %v", what, err)
	}
	want := "ran Scheduled job " + j.ID
	base.tg.Wait(t, "the "+what+" job's run", func() bool { return slices.Contains(base.tg.Visible(owner), want) })
	jobs := filepath.Join(base.home, CronJobsFile)
	base.waitUntil("the "+what+" job to leave the jobs file", func() bool {
		data, err := os.ReadFile(jobs)
		return err == nil && !strings.Contains(string(data), j.ID)
	})
	// Time for a second run, were there one: more than a lease and a look
	// at the file on every worker. (An absence: a late run makes this pass
	// wrongly, never fail.)
	time.Sleep(cronLeaseTTL + time.Second)
	shown, asked := 0, 0
	for _, v := range base.tg.Visible(owner) {
		if v == want {
			shown++
		}
	}
	for _, r := range base.script.Requests() {
		if strings.Contains(r.LastUserText(), "Scheduled job "+j.ID) {
			asked++
		}
	}
	if shown != 1 || asked != 1 {
		t.Errorf("the %s job's run was shown %d times and the model asked %d times; want once each", what, shown, asked)
	}
}

// On the NATS bus Discord's cursors are in KV, not in the data dir: a
// channels process restarted with no cursor file still answers the message
// sent while it was down.
func TestScaleOutDiscordCatchesUpFromKV(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	base := newGW(t, setup{discord: true})
	base.script.Func = func(r fakellm.Request) fakellm.Reply {
		text := r.LastUserText()
		return fakellm.Reply{Text: "re: " + text[strings.LastIndex(text, "\n")+1:]}
	}
	base.writeConfig(setup{discord: true, noTelegram: true}, fmt.Sprintf(
		"bus:\n  backend: nats\n  nats: {url: %q, partitions: 4, ack_wait: 2s}\n", srv.URL()))
	base.role = RoleChannels
	base.start()
	startRole(base, RoleAgent).waitReady(true)
	base.dc.WaitReady(t, 1)
	dm := base.dc.AddDM(base.dcOwner)
	base.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: base.dcOwner, Content: "one"})
	base.dcWaitLast(dm, "re: one")
	if err := base.stop(); err != nil {
		t.Fatalf("channels: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base.home, discord.CursorFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s in the data dir (err %v): the cursors belong in KV", discord.CursorFile, err)
	}
	base.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: base.dcOwner, Content: "two"})
	again := startRole(base, RoleChannels)
	again.dcWaitLast(dm, "re: two")
}

// With split roles the channels process serves the web page but never
// writes a session: the agent workers do. The page must show what they
// wrote, not the copy the channels process read earlier
// (docs/scale-out.md#subjects-and-streams); the old channels process kept
// showing the first turn's 2 of 4 messages.
func TestScaleOutWebPageShowsWhatWorkersWrote(t *testing.T) {
	for _, sessions := range []string{config.SessionsSharedVolume, config.SessionsJetStream} {
		t.Run(sessions, func(t *testing.T) {
			srv := natsfake.Start(t, t.TempDir())
			base := newGW(t, setup{})
			base.script.Func = func(r fakellm.Request) fakellm.Reply {
				return fakellm.Reply{Text: "re: " + r.LastUserText()}
			}
			base.writeConfig(setup{}, fmt.Sprintf(
				"bus:\n  backend: nats\n  nats: {url: %q, partitions: 4, ack_wait: 2s, sessions: %s}\n", srv.URL(), sessions))
			base.role = RoleChannels
			base.start()
			startRole(base, RoleAgent).waitReady(true)
			c := newWebClient(t, base)
			var chat struct{ ID string }
			c.call("POST", "/api/chats", `{}`, &chat)
			for i, text := range []string{"first", "second"} {
				c.call("POST", "/api/chats/"+chat.ID+"/messages", `{"text":"`+text+`"}`, nil)
				want := 2 * (i + 1)
				var got int
				base.waitUntil(fmt.Sprintf("the page shows %d messages", want), func() bool {
					got = len(c.hello(chat.ID).Messages)
					return got == want
				})
			}
		})
	}
}
