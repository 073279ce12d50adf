package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// agentFunc answers each inbound message by publishing what reply returns.
func runAgent(t *testing.T, b *bus.Bus, reply func(bus.InboundMessage) []bus.OutboundMessage) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range b.Inbound() {
			for _, o := range reply(m) {
				o.Channel, o.ChatID = m.Channel, m.ChatID
				if err := b.PublishOutbound(context.Background(), o); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		b.Close()
		<-done
	})
}

func TestAsk(t *testing.T) {
	tests := []struct {
		name    string
		stream  bool
		input   string
		reply   []bus.OutboundMessage
		want    string
		wantErr bool
	}{
		{
			name:  "final only when not streaming",
			input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindStart}, {Kind: bus.KindDraft, Content: "Hel"}, {Kind: bus.KindFinal, Content: "Hello"}},
			want:  "Hello\n",
		},
		{
			name: "streamed drafts then the rest of the final", stream: true, input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindStart}, {Kind: bus.KindDraft, Content: "Hel"}, {Kind: bus.KindDraft, Content: "Hello wor"}, {Kind: bus.KindFinal, Content: "Hello world"}},
			want:  "Hello world\n",
		},
		{
			name: "status line between calls", stream: true, input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindDraft, Content: "Let me check."}, {Kind: bus.KindStatus, Content: "🔧 read_file"}, {Kind: bus.KindDraft, Content: "Done"}, {Kind: bus.KindFinal, Content: "Done."}},
			want:  "Let me check.\n🔧 read_file\nDone.\n",
		},
		{
			name: "final that does not continue the draft", stream: true, input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindDraft, Content: "abc"}, {Kind: bus.KindFinal, Content: "xyz"}},
			want:  "abc\nxyz\n",
		},
		{
			name:  "message tool output then empty final",
			input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindMessage, Content: "sent via tool"}, {Kind: bus.KindFinal}},
			want:  "sent via tool\n",
		},
		{
			// See docs/reliability.md#every-turn-ends-with-something-to-read.
			// A progress note does not swallow the answer, and does not land
			// on the line of the streamed text before it.
			name: "progress note mid-stream, then the answer", stream: true, input: "hi",
			reply: []bus.OutboundMessage{{Kind: bus.KindDraft, Content: "Let me look."}, {Kind: bus.KindMessage, Content: "working on it"},
				{Kind: bus.KindDraft, Content: "The answer"}, {Kind: bus.KindFinal, Content: "The answer is 42."}},
			want: "Let me look.\nworking on it\nThe answer is 42.\n",
		},
		{
			name:    "error final",
			input:   "hi",
			reply:   []bus.OutboundMessage{{Kind: bus.KindFinal, Content: "⚠️ provider down", IsError: true}},
			want:    "⚠️ provider down\n",
			wantErr: true,
		},
		{
			name:  "command answered by one message",
			input: "/status",
			reply: []bus.OutboundMessage{{Kind: bus.KindMessage, Content: "Model: x"}},
			want:  "Model: x\n",
		},
		{
			name:  "a command that takes a while ends with its outcome",
			input: "/new",
			reply: []bus.OutboundMessage{{Kind: bus.KindStart, TurnID: "t"}, {Kind: bus.KindMessage, TurnID: "t", Content: "💾 Saving…"},
				{Kind: bus.KindFinal, TurnID: "t", Content: "Started a new conversation."}},
			want: "💾 Saving…\nStarted a new conversation.\n",
		},
		{
			name:  "and fails when it failed",
			input: "/new",
			reply: []bus.OutboundMessage{{Kind: bus.KindStart, TurnID: "t"}, {Kind: bus.KindMessage, TurnID: "t", Content: "💾 Saving…"},
				{Kind: bus.KindFinal, TurnID: "t", Content: "⚠️ I could not save this conversation", IsError: true}},
			want:    "💾 Saving…\n⚠️ I could not save this conversation\n",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bus.New(16)
			runAgent(t, b, func(bus.InboundMessage) []bus.OutboundMessage { return tt.reply })
			var out bytes.Buffer
			c := New(b, &out)
			c.Stream = tt.stream
			err := c.Ask(context.Background(), tt.input)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Ask error = %v, wantErr %v", err, tt.wantErr)
			}
			if out.String() != tt.want {
				t.Errorf("printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestAskIgnoresOtherChannels(t *testing.T) {
	b := bus.New(16)
	go func() {
		m := <-b.Inbound()
		_ = b.PublishOutbound(context.Background(), bus.OutboundMessage{Channel: "telegram", ChatID: "1", Kind: bus.KindFinal, Content: "not for you"})
		_ = b.PublishOutbound(context.Background(), bus.OutboundMessage{Channel: m.Channel, ChatID: m.ChatID, Kind: bus.KindFinal, Content: "for you"})
	}()
	var out bytes.Buffer
	if err := New(b, &out).Ask(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "for you\n" {
		t.Errorf("printed %q", out.String())
	}
}

func TestAskWhenTheAgentStops(t *testing.T) {
	b := bus.New(16)
	go func() {
		<-b.Inbound()
		b.CloseOutbound()
	}()
	err := New(b, &bytes.Buffer{}).Ask(context.Background(), "hi")
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("err = %v, want ErrNoAnswer", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	b2 := bus.New(16)
	if err := New(b2, &bytes.Buffer{}).Ask(ctx, "hi"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline", err)
	}
}

func TestREPL(t *testing.T) {
	b := bus.New(16)
	var got []string
	runAgent(t, b, func(m bus.InboundMessage) []bus.OutboundMessage {
		got = append(got, m.Content)
		if m.Content == "fail" {
			return []bus.OutboundMessage{{Kind: bus.KindFinal, Content: "oops", IsError: true}}
		}
		return []bus.OutboundMessage{{Kind: bus.KindFinal, Content: "echo " + m.Content}}
	})
	var out bytes.Buffer
	in := strings.NewReader("one\n\nfail\ntwo\nexit\nnever\n")
	if err := New(b, &out).REPL(context.Background(), in, "> "); err != nil {
		t.Fatal(err)
	}
	want := "> echo one\n> > oops\n> echo two\n> "
	if out.String() != want {
		t.Errorf("REPL printed %q, want %q", out.String(), want)
	}
	if strings.Join(got, ",") != "one,fail,two" {
		t.Errorf("agent got %v (blank lines and text after exit must not be sent)", got)
	}
}
