package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// /stop on the NATS bus (bus.backend: nats, a real nats-server in-process),
// in one process and split into a channels process and an agent worker:
// the correction sent while the answer ran is held by JetStream behind the
// running turn (a partition's consumer has MaxAckPending 1), not lost with
// it; /stop, which overtakes it on the fast path, cancels the turn, and the
// correction is answered next and saved.
func TestStopAnswersTheQueuedCorrectionOverNATS(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(map[bool]string{false: "one process", true: "channels and a worker"}[split], func(t *testing.T) {
			srv := natsfake.Start(t, t.TempDir())
			g := newGW(t, setup{})
			g.writeConfig(setup{telegram: "streaming: false"}, fmt.Sprintf(
				"bus:\n  backend: nats\n  nats: {url: %q, partitions: 4, ack_wait: 2s}\n", srv.URL()))
			g.role = RoleAll
			worker := g
			if split {
				g.role = RoleChannels
			}
			g.start()
			if split {
				worker = startRole(g, RoleAgent)
			}
			worker.waitReady(true)

			g.script.Push(fakellm.Reply{Text: "a very long essay", Delay: 10 * time.Minute})
			g.tg.PushMessage(telegramfake.DM(owner, "write an essay on bees"))
			g.waitUntil("the first turn to run", func() bool { return len(g.script.Requests()) == 1 })
			g.script.Push(fakellm.Reply{Text: "Bees, briefly: they make honey."})
			g.tg.PushMessage(telegramfake.DM(owner, "actually, keep it to one line"))
			g.tg.PushMessage(telegramfake.DM(owner, "/stop"))
			g.waitLast(owner, "Bees, briefly: they make honey.")
			v := g.tg.Visible(owner)
			// The worker cannot see what waits in the stream, so the reply
			// does not promise it (docs/scale-out.md#stop); it is kept anyway.
			if !strings.Contains(strings.Join(v, "|"), "⏹ Stopped.") {
				t.Errorf("chat = %q; want the stop reply", v)
			}
			reqs := g.script.Requests()
			if len(reqs) != 2 || !strings.HasSuffix(reqs[1].LastUserText(), "actually, keep it to one line") {
				t.Fatalf("%d model calls; the second must be the correction: %+v", len(reqs), reqs)
			}
			for _, p := range []*gw{worker, g} {
				if err := p.stop(); err != nil {
					t.Fatal(err)
				}
			}
			msgs := g.sessionMessages("telegram:100")
			if got := roles(msgs); got != "user,user,assistant" || !strings.HasSuffix(msgs[1].Text(), "actually, keep it to one line") {
				t.Errorf("session roles %s; the correction must be saved with its answer", got)
			}
		})
	}
}
