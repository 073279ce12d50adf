package api

import (
	"cmp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestCallShowsWhatGrowsAndNeverTakesBack feeds a call the outbound
// messages of turns and checks what a client would be sent.
func TestCallShowsWhatGrowsAndNeverTakesBack(t *testing.T) {
	msg := func(k bus.Kind, content string) bus.OutboundMessage {
		return bus.OutboundMessage{Kind: k, Content: content, TurnID: "t1"}
	}
	cases := []struct {
		name      string
		in        []bus.OutboundMessage
		content   string // what a stream shows
		reasoning string
		failed    bool
		whole     string // the non-streamed answer, when it differs from content
	}{
		{"drafts grow into the final", []bus.OutboundMessage{msg(bus.KindStart, ""), msg(bus.KindDraft, "Hel"),
			msg(bus.KindDraft, "Hello"), msg(bus.KindFinal, "Hello there")}, "Hello there", "", false, ""},
		{"text before tools stays, the answer is a new paragraph", []bus.OutboundMessage{msg(bus.KindStart, ""),
			msg(bus.KindDraft, "Let me look."), msg(bus.KindStatus, "🔧 read_file a"), msg(bus.KindDraft, "Found"),
			msg(bus.KindFinal, "Found it.")}, "Let me look.\n\nFound it.", "🔧 read_file a\n", false, ""},
		// Only the stream the client already saw carries the first attempt;
		// the non-streamed answer is the retried call's text alone.
		{"a retried call that says something else", []bus.OutboundMessage{msg(bus.KindStart, ""), msg(bus.KindDraft, "Hel"),
			msg(bus.KindDraft, "Hi!"), msg(bus.KindFinal, "Hi!")}, "Hel\n\nHi!", "", false, "Hi!"},
		{"a retried call after text before tools", []bus.OutboundMessage{msg(bus.KindStart, ""), msg(bus.KindDraft, "Let me look."),
			msg(bus.KindStatus, "🔧 read_file a"), msg(bus.KindDraft, "Fou"), msg(bus.KindDraft, "Here it is."),
			msg(bus.KindFinal, "Here it is.")}, "Let me look.\n\nFou\n\nHere it is.", "🔧 read_file a\n", false,
			"Let me look.\n\nHere it is."},
		{"files the API cannot carry are named, not dropped", []bus.OutboundMessage{msg(bus.KindStart, ""),
			{Kind: bus.KindMessage, Content: "The report:", Media: []llm.Part{{Kind: llm.PartFileRef,
				File: &llm.FileRef{Path: "out/report.pdf", Name: "report.pdf"}}}}, msg(bus.KindFinal, "Done.")},
			"The report:\n\n📎 report.pdf: the assistant sent 1 file(s) here, which this API cannot carry; they are in its " +
				"workspace (the web page or a chat app shows them).\n\nDone.", "", false, ""},
		{"the message tool answered", []bus.OutboundMessage{msg(bus.KindStart, ""), msg(bus.KindStatus, "🔧 message"),
			{Kind: bus.KindMessage, Content: "Here you go."}, msg(bus.KindFinal, "")}, "Here you go.", "🔧 message\n", false, ""},
		{"another turn of the chat is not mixed in", []bus.OutboundMessage{msg(bus.KindStart, ""), msg(bus.KindDraft, "Mine"),
			{Kind: bus.KindDraft, Content: "Theirs", TurnID: "t2"}, msg(bus.KindFinal, "Mine.")}, "Mine.", "", false, ""},
		{"a command's reply", []bus.OutboundMessage{{Kind: bus.KindMessage, Content: "Model: x", ReplyTo: "req"}}, "Model: x", "", false, ""},
		{"a failed turn", []bus.OutboundMessage{msg(bus.KindStart, ""), {Kind: bus.KindFinal, TurnID: "t1", IsError: true,
			Content: "⚠️ try again"}}, "", "", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCall("req", true)
			ended := false
			var sent strings.Builder
			for _, m := range tc.in {
				if ended {
					t.Fatalf("ended before %v", m.Kind)
				}
				ended = c.receive(m)
				chunks, _ := c.take()
				for _, ch := range chunks {
					if !ch.reasoning {
						sent.WriteString(ch.text)
					}
				}
			}
			if !ended {
				t.Fatal("the call did not end")
			}
			res := c.result()
			whole := cmp.Or(tc.whole, tc.content)
			if res.content != whole || res.streamed != tc.content || sent.String() != tc.content || res.reasoning != tc.reasoning || res.failed != tc.failed {
				t.Errorf("content %q (streamed %q, sent %q), reasoning %q, failed %v; want %q (streamed %q), %q, %v",
					res.content, res.streamed, sent.String(), res.reasoning, res.failed, whole, tc.content, tc.reasoning, tc.failed)
			}
		})
	}
}

// TestNoSilentEmptyAnswer: a turn that ended without an error but with
// nothing to show is an error answer, never a 200 with empty content
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func TestNoSilentEmptyAnswer(t *testing.T) {
	c := newCall("q1", false)
	c.receive(bus.OutboundMessage{Kind: bus.KindStart, TurnID: "t"})
	if !c.receive(bus.OutboundMessage{Kind: bus.KindFinal, TurnID: "t", Content: " \n"}) {
		t.Fatal("the final did not end the call")
	}
	if e := endError(c.result()); e == nil || e.status != 502 || e.code != "empty_answer" {
		t.Fatalf("endError = %+v, want 502 empty_answer", e)
	}
}
