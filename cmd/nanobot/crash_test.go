package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
	"github.com/nanobot-go/nanobot/internal/testkit/gobuild"
)

// These tests run `nanobot gateway` as a real process against the fake
// Telegram and OpenAI servers, and kill it with SIGKILL at the worst
// moments: a crash must never lose a message nor answer one twice.

// gatewayEnv is one machine running the daemon: a config and data dir, the
// fakes, and the process while it runs.
type gatewayEnv struct {
	t      *testing.T
	home   string
	config string
	script *fakellm.Script
	llm    *openaifake.Server
	tg     *telegramfake.Server
	dc     *discordfake.Server // set by addDiscord

	cmd    *exec.Cmd
	exited chan struct{}
	stderr *lockedBuffer
	// args are added after "gateway" (--role).
	args []string
}

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	alice = 100
	bob   = 101
)

// newGatewayEnv writes a config for the fakes; extra is YAML lines added
// under channels.telegram.
func newGatewayEnv(t *testing.T, extra string) *gatewayEnv {
	t.Helper()
	e := &gatewayEnv{t: t, home: t.TempDir(), script: &fakellm.Script{}}
	e.llm = openaifake.New(t, e.script)
	e.tg = telegramfake.New(t)
	e.config = filepath.Join(e.home, ".nanobot", "config.yaml")
	yaml := fmt.Sprintf(`agents:
  workspace: %s
  model: openai/gpt-4o-mini
  max_concurrent_turns: 1
providers:
  openai: {api_key: "${OPENAI_API_KEY}", base_url: %q, max_retries: 0}
channels:
  telegram:
    enabled: true
    token: "${TELEGRAM_BOT_TOKEN}"
    api_url: %q
    allow_from: ["%d", "%d"]
    edit_interval: 10ms
    poll_timeout: 1s
%sgateway:
  listen: 127.0.0.1:0
  shutdown_grace: 5s
  heartbeat: {enabled: false}
log: {level: debug, format: json}
`, filepath.Join(e.home, ".nanobot", "workspace"), e.llm.URL(), e.tg.URL(), alice, bob, indentLines(extra, "    "))
	if err := os.MkdirAll(filepath.Dir(e.config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stopIfRunning)
	return e
}

func indentLines(s, by string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(by + strings.TrimSpace(l) + "\n")
		}
	}
	return b.String()
}

// start runs the gateway and waits until it polls Telegram.
func (e *gatewayEnv) start() {
	e.t.Helper()
	polls := len(e.tg.Calls("getUpdates"))
	e.launch()
	e.tg.Wait(e.t, "the gateway to poll", func() bool { return len(e.tg.Calls("getUpdates")) > polls })
}

// launch starts the gateway process.
func (e *gatewayEnv) launch() {
	e.t.Helper()
	e.cmd = exec.Command(binary, append([]string{"--config", e.config, "gateway"}, e.args...)...)
	e.cmd.Env = e.env()
	e.stderr = &lockedBuffer{}
	e.cmd.Stdout, e.cmd.Stderr = e.stderr, e.stderr
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(e.cmd, e.exited)
}

// env is the daemon's environment: the secrets come from it, as a user's
// systemd unit or container would pass them.
func (e *gatewayEnv) env() []string {
	env := append([]string{
		"HOME=" + e.home, "PATH=" + os.Getenv("PATH"),
		"OPENAI_API_KEY=" + openaifake.DefaultAPIKey, "TELEGRAM_BOT_TOKEN=" + telegramfake.Token,
	}, gobuild.Env()...)
	if e.dc != nil {
		env = append(env, "DISCORD_BOT_TOKEN="+e.dc.Token())
	}
	return env
}

// addDiscord starts a fake Discord and enables the Discord channel, with
// owner allowed, in the config.
func (e *gatewayEnv) addDiscord() (owner discordfake.User) {
	e.t.Helper()
	e.dc = discordfake.New(e.t, discordfake.Options{})
	owner = e.dc.NewUser("owner")
	data, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	block := fmt.Sprintf("  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\", api_url: %q, allow_from: [%q], edit_interval: 10ms}\ngateway:", e.dc.URL(), owner.ID)
	yaml := strings.Replace(string(data), "gateway:", block, 1)
	if err := os.WriteFile(e.config, []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return owner
}

// kill9 kills the gateway with SIGKILL: no shutdown code runs.
func (e *gatewayEnv) kill9() {
	e.t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	e.waitExit()
}

// stop asks the gateway to shut down (SIGTERM) and waits for it.
func (e *gatewayEnv) stop() {
	e.t.Helper()
	cmd := e.cmd
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		e.t.Fatal(err)
	}
	e.waitExit()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		e.t.Errorf("gateway exited with %d after SIGTERM:\n%s", code, e.stderr)
	}
}

func (e *gatewayEnv) waitExit() {
	e.t.Helper()
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		e.t.Fatalf("gateway did not exit:\n%s", e.stderr)
	}
	e.cmd = nil
}

func (e *gatewayEnv) stopIfRunning() {
	if e.cmd != nil {
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
}

// waitUntil polls cond (the model's request log is not signalled).
func (e *gatewayEnv) waitUntil(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s\nstderr:\n%s", what, e.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *gatewayEnv) say(chat int64, text string) int64 {
	return e.tg.PushMessage(telegramfake.DM(chat, text))
}

// waitVisible waits until chat shows want (the messages joined by "|").
func (e *gatewayEnv) waitVisible(chat int64, want string) {
	e.t.Helper()
	e.tg.Wait(e.t, fmt.Sprintf("chat %d to show %q", chat, want), func() bool {
		return strings.Join(e.tg.Visible(chat), "|") == want
	})
}

// pendingUpdates is how many updates the journal still holds.
func (e *gatewayEnv) pendingUpdates() int {
	_, pending, err := telegram.ReadJournal(filepath.Join(e.home, ".nanobot", "telegram-updates.json"))
	if err != nil {
		return -1
	}
	return len(pending)
}

// sessionRoles reads a chat's session as a restarted store would.
func (e *gatewayEnv) sessionRoles(chat int64) string {
	e.t.Helper()
	return e.roles(fmt.Sprintf("telegram:%d", chat))
}

// roles reads a session as a restarted store would and lists its roles.
func (e *gatewayEnv) roles(key string) string {
	e.t.Helper()
	store := session.NewStore(filepath.Join(e.home, ".nanobot", "sessions"), session.Options{}, zap.NewNop())
	defer func() { _ = store.Close() }()
	snap, err := store.Get(key)
	if err != nil {
		e.t.Fatal(err)
	}
	roles := make([]string, len(snap.Messages))
	for i, m := range snap.Messages {
		if err := m.Validate(); err != nil {
			e.t.Errorf("session message %d: %v", i, err)
		}
		roles[i] = string(m.Role)
	}
	return strings.Join(roles, ",")
}

// answerLast answers "answer to <last line of the user's text>".
func answerLast(r fakellm.Request) fakellm.Reply {
	text := r.LastUserText()
	return fakellm.Reply{Text: "answer to " + text[strings.LastIndex(text, "\n")+1:]}
}

// hangOnceOn answers like answerLast, except that the first request about
// text never gets an answer (until the process dies and the request with it).
func hangOnceOn(text string) func(fakellm.Request) fakellm.Reply {
	var hung atomic.Bool
	return func(r fakellm.Request) fakellm.Reply {
		reply := answerLast(r)
		if strings.HasSuffix(r.LastUserText(), "\n"+text) && !hung.Swap(true) {
			reply.Delay = time.Hour
		}
		return reply
	}
}

func (e *gatewayEnv) requestsFor(text string) int {
	n := 0
	for _, r := range e.script.Requests() {
		if strings.HasSuffix(r.LastUserText(), "\n"+text) {
			n++
		}
	}
	return n
}

// SIGKILL while the model is answering alice, with bob's message received
// but still waiting for the only turn slot: after the restart alice's turn
// resumes and bob's message is replayed; each is answered exactly once.
func TestKill9MidTurnThenRestart(t *testing.T) {
	e := newGatewayEnv(t, "")
	e.script.Func = hangOnceOn("first")
	e.start()
	e.say(alice, "first")
	e.waitUntil("the model to be asked", func() bool { return e.requestsFor("first") == 1 })
	second := e.say(bob, "second")
	e.tg.Wait(t, "bob's message to be journaled", func() bool { return e.tg.Confirmed() > second })
	e.kill9()

	e.start()
	e.waitVisible(alice, "answer to first")
	e.waitVisible(bob, "answer to second")
	e.say(alice, "third")
	e.say(bob, "third")
	e.waitVisible(alice, "answer to first|answer to third")
	e.waitVisible(bob, "answer to second|answer to third")
	e.stop()

	for chat, want := range map[int64]string{alice: "answer to first|answer to third", bob: "answer to second|answer to third"} {
		if got := strings.Join(e.tg.Visible(chat), "|"); got != want {
			t.Errorf("chat %d sees %q, want %q", chat, got, want)
		}
		if r := e.sessionRoles(chat); r != "user,assistant,user,assistant" {
			t.Errorf("chat %d session roles = %s, want each message once", chat, r)
		}
	}
	if n, m := e.requestsFor("first"), e.requestsFor("second"); n != 2 || m != 1 {
		t.Errorf("model asked %d times about first (want 2: killed, resumed) and %d about second (want 1)", n, m)
	}
}

// SIGKILL while the model answers alice, who writes again while the daemon
// is down: after the restart her first message comes back from the update
// journal and the second from getUpdates, one backlog, so the resumed turn
// takes in both and she gets one answer, as on Discord.
func TestKill9MidTurnThenRestartWithAMessageSentWhileDown(t *testing.T) {
	e := newGatewayEnv(t, "")
	e.script.Func = hangOnceOn("first")
	e.start()
	first := e.say(alice, "first")
	e.waitUntil("the model to be asked", func() bool { return e.requestsFor("first") == 1 })
	e.tg.Wait(t, "the first message to be journaled", func() bool { return e.tg.Confirmed() > first })
	e.kill9()
	e.say(alice, "while down")

	e.start()
	e.waitVisible(alice, "answer to while down")
	e.say(alice, "third")
	e.waitVisible(alice, "answer to while down|answer to third")
	e.stop()

	if r := e.sessionRoles(alice); r != "user,user,assistant,user,assistant" {
		t.Errorf("session roles = %s, want each message once and one answer for the first two", r)
	}
	if n, m := e.requestsFor("first"), e.requestsFor("while down"); n != 1 || m != 1 {
		t.Errorf("model asked %d times ending with first (want 1: killed) and %d ending with the message sent while down (want 1)", n, m)
	}
}

// SIGKILL after an answer was delivered and acknowledged: the restart does
// not answer it again.
func TestKill9AfterAnswerDoesNotRepeatIt(t *testing.T) {
	e := newGatewayEnv(t, "")
	e.script.Func = answerLast
	e.start()
	e.say(alice, "one")
	e.waitVisible(alice, "answer to one")
	e.waitUntil("the journal to record the answer", func() bool { return e.pendingUpdates() == 0 })
	e.kill9()
	e.start()
	e.say(alice, "two")
	e.waitVisible(alice, "answer to one|answer to two")
	e.stop()
	if got := strings.Join(e.tg.Visible(alice), "|"); got != "answer to one|answer to two" {
		t.Errorf("alice sees %q", got)
	}
	if n := len(e.script.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
	if r := e.sessionRoles(alice); r != "user,assistant,user,assistant" {
		t.Errorf("session roles = %s", r)
	}
}

// SIGKILL while the answer is on its way to Telegram (the send hangs): the
// answer is in the session but never reached the user, so after the
// restart it is sent from the session, without asking the model again.
func TestKill9DuringDeliverySendsTheRecordedAnswer(t *testing.T) {
	e := newGatewayEnv(t, "streaming: false")
	e.script.Func = answerLast
	e.tg.Inject("sendMessage", telegramfake.Fault{Kind: telegramfake.Stall})
	e.start()
	e.say(alice, "precious")
	e.tg.Wait(t, "the answer's send to hang", func() bool {
		for _, c := range e.tg.Calls("sendMessage") {
			if c.Error == "stalled" {
				return true
			}
		}
		return false
	})
	e.kill9()
	e.start()
	e.waitVisible(alice, "answer to precious")
	e.say(alice, "next")
	e.waitVisible(alice, "answer to precious|answer to next")
	e.stop()
	if n := e.requestsFor("precious"); n != 1 {
		t.Errorf("model asked %d times about the delivered-late question, want 1", n)
	}
	if r := e.sessionRoles(alice); r != "user,assistant,user,assistant" {
		t.Errorf("session roles = %s", r)
	}
}

// SIGKILL while the model answers a Discord DM, then a message posted while
// the daemon is down. Discord redelivers neither: after the restart the
// catch-up fetches both; the agent finds the first in the session, its turn
// unfinished, and resumes it with the second taken in (as it merges any
// messages that queue up for a chat): one answer for both, nothing lost,
// nothing answered twice.
func TestKill9MidTurnOnDiscordThenRestart(t *testing.T) {
	tests := []struct {
		name string
		// slow holds the download of the attachment of the message sent
		// while down: its handling then lags far behind the resumed one's.
		slow  time.Duration
		files []discordfake.IncomingFile
	}{
		{name: "text"},
		{name: "the later message's image downloads slowly", slow: 400 * time.Millisecond,
			files: []discordfake.IncomingFile{{Name: "a.png", ContentType: "image/png", Data: crashTinyPNG}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGatewayEnv(t, "")
			owner := e.addDiscord()
			e.script.Func = hangOnceOn("first")
			e.start()
			e.dc.WaitReady(t, 1)
			dm := e.dc.AddDM(owner)
			say := func(text string, files ...discordfake.IncomingFile) {
				e.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: owner, Content: text, Attachments: files})
			}
			say("first")
			e.waitUntil("the model to be asked", func() bool { return e.requestsFor("first") == 1 })
			e.kill9()
			say("while down", tt.files...)
			if tt.slow > 0 {
				e.dc.Fail(discordfake.RouteAttachment, discordfake.Failure{Delay: tt.slow})
			}

			e.start()
			answers := func() string {
				var out []string
				for _, m := range e.dc.Messages(dm) {
					if !m.Deleted {
						out = append(out, m.Content)
					}
				}
				return strings.Join(out, "|")
			}
			e.waitUntil("the answer after the restart", func() bool { return answers() == "answer to while down" })
			say("third")
			e.waitUntil("the third answer", func() bool { return answers() == "answer to while down|answer to third" })
			e.stop()

			if got, want := answers(), "answer to while down|answer to third"; got != want {
				t.Errorf("the DM shows %q, want %q", got, want)
			}
			if r := e.roles("discord:" + dm); r != "user,user,assistant,user,assistant" {
				t.Errorf("session roles = %s, want each message once and one answer for the first two", r)
			}
			if n, m := e.requestsFor("first"), e.requestsFor("while down"); n != 1 || m != 1 {
				t.Fatalf("model asked %d times ending with first (want 1: killed) and %d ending with the message sent while down (want 1)", n, m)
			}
			for _, r := range e.script.Requests() {
				if strings.HasSuffix(r.LastUserText(), "\nwhile down") && !slices.ContainsFunc(r.Messages, func(m fakellm.Message) bool {
					return m.Role == "user" && strings.HasSuffix(m.Text, "\nfirst")
				}) {
					t.Errorf("the resumed turn does not show the model the first message: %+v", r.Messages)
				}
			}
		})
	}
}

// crashTinyPNG is a 1×1 PNG.
var crashTinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// SIGKILL, and on disk what a crash in the middle of a journal write leaves:
// a last line cut short (an append that never finished, so the batch in it
// was never confirmed to Telegram) and the temp file of a compaction that
// never reached its rename. The restart drops the torn line, removes the
// temp file, answers the message that was pending exactly once, and does
// not answer again the one already acknowledged; Telegram redelivers the
// update whose append was torn, which is then answered once.
func TestKill9WithATornJournalAppend(t *testing.T) {
	e := newGatewayEnv(t, "")
	e.script.Func = hangOnceOn("second")
	e.start()
	e.say(alice, "first")
	e.waitVisible(alice, "answer to first")
	e.waitUntil("the journal to record the answer", func() bool { return e.pendingUpdates() == 0 })
	e.say(bob, "second")
	e.waitUntil("the model to be asked", func() bool { return e.requestsFor("second") == 1 })
	e.kill9()

	path := filepath.Join(e.home, ".nanobot", "telegram-updates.json")
	// A batch Telegram still holds (never confirmed: its append was torn).
	third := e.say(alice, "third")
	torn := fmt.Sprintf(`{"next_offset":%d,"add":[{"update_id":%d,"message":{"message_id":9`, third+1, third)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	stale := filepath.Join(filepath.Dir(path), ".telegram-updates.json.tmp-1")
	if err := os.WriteFile(stale, []byte(`{"next_offset":`), 0o600); err != nil {
		t.Fatal(err)
	}

	e.start()
	e.waitVisible(bob, "answer to second")
	e.waitVisible(alice, "answer to first|answer to third")
	e.waitUntil("the journal to record the answers", func() bool { return e.pendingUpdates() == 0 })
	e.stop()

	if !strings.Contains(e.stderr.String(), "cut short by a crash") {
		t.Error("the torn line was not reported in the log")
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the compaction's temp file was left")
	}
	if n, m := e.requestsFor("second"), e.requestsFor("third"); n != 2 || m != 1 {
		t.Errorf("model asked %d times about second (want 2: killed, resumed) and %d about third (want 1)", n, m)
	}
	if r := e.sessionRoles(alice); r != "user,assistant,user,assistant" {
		t.Errorf("alice's session roles = %s, want each message once", r)
	}
	if r := e.sessionRoles(bob); r != "user,assistant" {
		t.Errorf("bob's session roles = %s, want each message once", r)
	}
}
