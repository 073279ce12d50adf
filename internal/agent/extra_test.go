package agent

import (
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// A command another part of the daemon answers is routed without a model
// call, listed by /help, and cannot shadow a built-in.
func TestExtraCommands(t *testing.T) {
	h := newHarnessDeps(t, func(d *Deps) {
		d.Commands = map[string]Command{
			"web": {Description: "log in to the web page", Answer: func(m bus.InboundMessage) string {
				return "link for " + m.Channel + ":" + m.SenderID
			}},
			"stop": {Description: "shadow", Answer: func(bus.InboundMessage) string { return "shadowed" }},
		}
	})
	h.send("c1", "/web@my_bot")
	out := h.waitFor("the /web answer", func(out []bus.OutboundMessage) bool { return len(out) > 0 })
	if out[0].Content != "link for test:u1" || out[0].Kind != bus.KindMessage {
		t.Fatalf("answer = %+v", out[0])
	}
	h.send("c1", "/help")
	out = h.waitFor("/help", func(out []bus.OutboundMessage) bool { return len(out) > 1 })
	if !strings.Contains(out[1].Content, "/web — log in to the web page") || strings.Contains(out[1].Content, "shadow") {
		t.Fatalf("/help = %q", out[1].Content)
	}
	h.send("c1", "/stop")
	out = h.waitFor("/stop", func(out []bus.OutboundMessage) bool { return len(out) > 2 })
	if out[2].Content == "shadowed" {
		t.Fatal("an extra command shadowed the built-in /stop")
	}
	if n := len(h.script.Requests()); n != 0 {
		t.Fatalf("%d model calls for commands", n)
	}
}
