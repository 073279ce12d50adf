package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// webAnswer stands in for the daemon's /web answer (and every other
// daemon command's).
func webAnswer(m bus.InboundMessage) string { return "link for " + m.Channel + ":" + m.SenderID }

// daemonAnswers answers every daemon command of the table with webAnswer.
func daemonAnswers(extra map[string]Command) map[string]Command {
	for _, c := range commands.All() {
		if c.Handler == commands.Daemon {
			extra[c.Name] = Command{Answer: webAnswer}
		}
	}
	return extra
}

// Every command in the table is answered without a model call, each by its
// handler: none falls through to the model or to the "no handler" reply,
// and a Deps.Commands entry cannot shadow a built-in or add a command the
// table does not have.
func TestEveryCommandDispatches(t *testing.T) {
	h := newHarnessDeps(t, func(d *Deps) {
		d.Commands = daemonAnswers(map[string]Command{
			"stop":  {Answer: func(bus.InboundMessage) string { return "shadowed" }},
			"extra": {Answer: func(bus.InboundMessage) string { return "not in the table" }},
		})
	})
	for _, c := range commands.All() {
		chat := "chat-" + c.Name
		h.send(chat, "/"+c.Name+"@my_bot")
		h.waitFor("/"+c.Name, func([]bus.OutboundMessage) bool { return len(h.messagesOfKind(chat, bus.KindMessage)) > 0 })
		m := h.messagesOfKind(chat, bus.KindMessage)[0]
		if m.IsError || strings.Contains(m.Content, "cannot answer") || m.Content == "shadowed" {
			t.Errorf("/%s (%v) = %+v", c.Name, c.Handler, m)
		}
		if c.Handler == commands.Daemon && m.Content != "link for test:u1" {
			t.Errorf("/%s = %q, want the daemon's answer", c.Name, m.Content)
		}
	}
	h.script.Push(fakellm.Reply{Text: "a model answer"})
	h.send("c1", "/extra")
	h.waitFinals("c1", 1)
	if n := len(h.script.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1: /extra is not a command, every table command is", n)
	}
}

// /help lists exactly the table, in its order, leaving out only the daemon
// commands nothing in this process answers.
func TestHelpListsTheTable(t *testing.T) {
	var daemonCmds []string
	for _, c := range commands.All() {
		if c.Handler == commands.Daemon {
			daemonCmds = append(daemonCmds, c.Name)
		}
	}
	tests := []struct {
		name string
		deps func(*Deps)
		skip []string
	}{
		{"daemon commands answered", func(d *Deps) { d.Commands = daemonAnswers(map[string]Command{}) }, nil},
		{"daemon commands not answered here", nil, daemonCmds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessDeps(t, tc.deps)
			h.send("c1", "/help")
			h.waitFor("/help", func([]bus.OutboundMessage) bool { return len(h.messagesOfKind("c1", bus.KindMessage)) > 0 })
			want := []string{"Commands:"}
			for _, c := range commands.All() {
				if !slices.Contains(tc.skip, c.Name) {
					want = append(want, c.Usage()+" — "+c.Description)
				}
			}
			if got := h.messagesOfKind("c1", bus.KindMessage)[0].Content; got != strings.Join(want, "\n") {
				t.Errorf("/help =\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
			for i, name := range tc.skip {
				h.send("c1", "/"+name)
				h.waitFor("/"+name, func([]bus.OutboundMessage) bool { return len(h.messagesOfKind("c1", bus.KindMessage)) > i+1 })
				if got := h.messagesOfKind("c1", bus.KindMessage)[i+1].Content; got != "/"+name+" is not available in this process." {
					t.Errorf("/%s unanswered here = %q", name, got)
				}
			}
		})
	}
}
