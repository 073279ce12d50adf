package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/testkit/gobuild"
)

// natsServer is built once, from the nats-server module this one requires,
// for the scale-out end-to-end test, next to the nanobot binary: TestMain
// removes both once every test (and every -count repetition) has run.
var natsServer = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(binary), "nats-server")
	if err := gobuild.Build("", bin, "github.com/nats-io/nats-server/v2"); err != nil {
		return "", fmt.Errorf("build nats-server: %w", err)
	}
	return bin, nil
})

// startNATS runs a nats-server process with JetStream until the test ends.
// The server picks its own port (-p -1: a port chosen beforehand may be
// taken by someone else before the server binds it) and writes it to a
// ports file once it listens; the test waits for that file.
func startNATS(t *testing.T) string {
	t.Helper()
	bin, err := natsServer()
	if err != nil {
		t.Fatal(err)
	}
	portsDir := t.TempDir()
	cmd := exec.Command(bin, "-js", "-sd", t.TempDir(), "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", portsDir)
	stderr := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	portsFile := filepath.Join(portsDir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), cmd.Process.Pid))
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The file is written in one go but not atomically: a partial
		// one does not parse yet.
		var ports struct{ Nats []string }
		if data, err := os.ReadFile(portsFile); err == nil && json.Unmarshal(data, &ports) == nil && len(ports.Nats) > 0 {
			return ports.Nats[0]
		}
		select {
		case <-exited:
			t.Fatalf("nats-server exited before it listened:\n%s", stderr)
		case <-time.After(20 * time.Millisecond): // polling for the file
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server wrote no ports file in 30s:\n%s", stderr)
		}
	}
}

// role returns a process of e's deployment (same config, fakes and
// workspace) that runs gateway --role role.
func (e *gatewayEnv) role(role string) *gatewayEnv {
	p := *e
	p.args = []string{"--role", role}
	p.cmd, p.exited, p.stderr = nil, nil, nil
	e.t.Cleanup(p.stopIfRunning)
	return &p
}

// The real binary split in three processes over a real nats-server: one
// channels process and two agent workers. The worker running a turn is
// killed with SIGKILL; the other takes the turn over and it is answered
// once. Then the channels process is killed and restarted: a message sent
// meanwhile is answered once, nothing is lost or repeated.
func TestScaleOutKill9WorkerAndChannels(t *testing.T) {
	url := startNATS(t)
	e := newGatewayEnv(t, "")
	data, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	bus := fmt.Sprintf("bus:\n  backend: nats\n  nats: {url: %q, partitions: 8, ack_wait: 2s}\ngateway:", url)
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(data), "gateway:", bus, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.script.Func = hangOnceOn("first")
	front, doomed, survivor := e.role("channels"), e.role("agent"), e.role("agent")
	front.start()
	doomed.launch()
	e.say(alice, "first")
	e.waitUntil("the first worker to ask the model", func() bool { return e.requestsFor("first") == 1 })
	survivor.launch()
	doomed.kill9()
	front.waitVisible(alice, "answer to first")

	e.say(bob, "second")
	e.say(alice, "third")
	front.waitVisible(bob, "answer to second")
	front.waitVisible(alice, "answer to first|answer to third")

	// Killed as soon as the answers show: the last final may be edited
	// into its draft but not yet acknowledged to NATS, so the restart gets
	// it again. The draft record (internal/channels/draftkv) makes it an
	// edit of the same message, not a second one (docs/scale-out.md). The
	// first draft ("answer t", 8 bytes of the fake's stream) is recorded
	// before anything else happens in the chat, so a whole answer on
	// screen always has its record.
	front.kill9()
	e.say(bob, "fourth") // nobody polls Telegram now
	front.start()
	front.waitVisible(bob, "answer to second|answer to fourth")

	front.stop()
	survivor.stop()
	for chat, want := range map[int64]string{alice: "answer to first|answer to third", bob: "answer to second|answer to fourth"} {
		if got := strings.Join(e.tg.Visible(chat), "|"); got != want {
			t.Errorf("chat %d sees %q, want %q", chat, got, want)
		}
		if r := e.sessionRoles(chat); r != "user,assistant,user,assistant" {
			t.Errorf("chat %d session roles = %s, want each message once", chat, r)
		}
	}
	if n := e.requestsFor("first"); n != 2 {
		t.Errorf("model asked %d times about first, want 2 (the killed worker, then the survivor resuming)", n)
	}
}

func TestDoctorChecksNATS(t *testing.T) {
	e := newEnv(t)
	srv := natsfake.Start(t, t.TempDir())
	bus := func(url string) []string {
		return doctorEnv(t, e, "NANOBOT_BUS_BACKEND=nats", "NANOBOT_BUS_NATS_URL="+url)
	}
	out, code := e.doctor(bus("nats://" + freeAddr(t)))
	if v := verdicts(out)["bus.nats"]; code == 0 || !strings.HasPrefix(v, "FAIL cannot reach NATS") {
		t.Errorf("NATS down: exit %d, bus.nats %q\n%s", code, v, out)
	}
	out, _ = e.doctor(bus(srv.URL()))
	if v := verdicts(out)["bus.nats"]; !strings.HasPrefix(v, "warn connected") || !strings.Contains(v, "NANOBOT_IN") {
		t.Errorf("no streams yet: bus.nats %q\n%s", v, out)
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
	cfg := config.NATSConfig{URL: srv.URL(), Prefix: "nanobot", Partitions: 2, AckWait: time.Second}
	if err := natsbus.Setup(t.Context(), js, cfg); err != nil {
		t.Fatal(err)
	}
	out, code = e.doctor(bus(srv.URL()))
	if v := verdicts(out)["bus.nats"]; code != 0 || !strings.HasPrefix(v, "ok connected") || !strings.Contains(v, "no process holds the scheduler lease") {
		t.Errorf("streams set up: exit %d, bus.nats %q\n%s", code, v, out)
	}

	// With sessions in JetStream the sessions stream is looked for too,
	// and the report names the process that runs cron and the heartbeat.
	jsSessions := append(bus(srv.URL()), "NANOBOT_BUS_NATS_SESSIONS=jetstream")
	out, _ = e.doctor(jsSessions)
	if v := verdicts(out)["bus.nats"]; !strings.HasPrefix(v, "warn connected") || !strings.Contains(v, "NANOBOT_SESSIONS") {
		t.Errorf("no sessions stream yet: bus.nats %q\n%s", v, out)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "NANOBOT_SESSIONS", Subjects: []string{"nanobot.session.*"}}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "NANOBOT_LEASE"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), natsbus.SchedulerLease, []byte("nanobot agent@host pid 42")); err != nil {
		t.Fatal(err)
	}
	out, code = e.doctor(jsSessions)
	if v := verdicts(out)["bus.nats"]; code != 0 || !strings.Contains(v, "cron and heartbeat run on nanobot agent@host pid 42") {
		t.Errorf("sessions stream and a leader: exit %d, bus.nats %q\n%s", code, v, out)
	}
}
