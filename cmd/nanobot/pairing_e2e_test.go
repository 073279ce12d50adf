package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

const (
	stranger  = 200 // asks to pair while the gateway runs
	oldFriend = 300 // approved in pairing.json before the switch to NATS
)

// With bus.backend: nats, pairing lives in the KV bucket: the channels
// process imports the pairing file it had once, and `nanobot pairing
// approve`, run as its own process, lets a pending sender in on the running
// channels process (an agent worker answers) without touching the file.
func TestPairingApproveThroughNATS(t *testing.T) {
	srv := natsfake.Start(t, t.TempDir())
	e := newGatewayEnv(t, "policy: pairing")
	e.script.Func = answerLast
	data, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	bus := fmt.Sprintf("bus:\n  backend: nats\n  nats: {url: %q, partitions: 2, ack_wait: 2s}\ngateway:", srv.URL())
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(data), "gateway:", bus, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(filepath.Dir(e.config), "pairing.json")
	old, err := channels.NewPairingStore(file).Request("telegram", fmt.Sprint(oldFriend), "@old", fmt.Sprint(oldFriend))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := channels.NewPairingStore(file).Approve(old); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	front, worker := e.role("channels"), e.role("agent")
	front.start()
	worker.launch()
	e.say(oldFriend, "hello")
	e.waitVisible(oldFriend, "answer to hello")

	e.say(stranger, "hi")
	e.tg.Wait(t, "a pairing code", func() bool { return len(e.tg.Visible(stranger)) == 1 })
	code := regexp.MustCompile(`approve ([A-Z0-9]{8})`).FindStringSubmatch(e.tg.Visible(stranger)[0])
	if code == nil {
		t.Fatalf("no code in %q", e.tg.Visible(stranger)[0])
	}
	out := e.pairing(t, "approve", code[1])
	if !strings.Contains(out, fmt.Sprintf("approved telegram user %d", stranger)) {
		t.Fatalf("pairing approve said %q", out)
	}
	e.say(stranger, "thanks")
	e.tg.Wait(t, "the approved sender's answer", func() bool {
		v := e.tg.Visible(stranger)
		return len(v) == 2 && v[1] == "answer to thanks"
	})
	list := e.pairing(t, "list")
	for _, id := range []int{stranger, oldFriend} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s+telegram\s+%d\s`, id)).MatchString(list) {
			t.Errorf("pairing list does not show %d approved:\n%s", id, list)
		}
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Errorf("the pairing file was written with pairing in NATS:\n%s", after)
	}
	front.stop()
	worker.stop()
}

// pairing runs `nanobot pairing args...` on e's config and returns its
// output; it must succeed.
func (e *gatewayEnv) pairing(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"--config", e.config, "pairing"}, args...)...)
	cmd.Env = e.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nanobot pairing %v: %v\n%s", args, err, out)
	}
	return string(out)
}
