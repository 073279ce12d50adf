package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
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

// Ctrl-C during an answer sends /stop and returns to the prompt once the
// turn's final and the stop's reply are printed; at the prompt one Ctrl-C
// prints how to leave, and a second one soon after leaves.
func TestREPLInterrupts(t *testing.T) {
	b := bus.New(16)
	ints := make(chan struct{}, 1)
	stopped := make(chan struct{})
	var stopReplyTo string
	runAgent(t, b, func(m bus.InboundMessage) []bus.OutboundMessage {
		switch m.Content {
		case "long":
			ints <- struct{}{} // the user presses Ctrl-C mid-answer
			return []bus.OutboundMessage{{Kind: bus.KindDraft, Content: "Once upon", TurnID: "t1"}}
		case "/stop":
			stopReplyTo = m.MessageID
			close(stopped)
			return []bus.OutboundMessage{{Kind: bus.KindFinal, TurnID: "t1"}, {Kind: bus.KindMessage, Content: "⏹ Stopped.", ReplyTo: m.MessageID}}
		}
		return []bus.OutboundMessage{{Kind: bus.KindFinal, Content: "echo " + m.Content}}
	})
	inR, inW := io.Pipe()
	defer func() { _ = inW.Close() }()
	var out syncBuffer
	c := New(b, &out)
	c.Stream = true
	c.Interrupts = ints
	now := time.Unix(0, 0)
	c.Clock = clock.Func(func() time.Time { return now })
	done := make(chan error, 1)
	go func() { done <- c.REPL(context.Background(), inR, "> ") }()
	if _, err := io.WriteString(inW, "long\n"); err != nil {
		t.Fatal(err)
	}
	<-stopped
	if _, err := io.WriteString(inW, "after\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "echo after\n> ")
	if stopReplyTo == "" {
		t.Error("the /stop had no message id for its reply to name")
	}
	ints <- struct{}{}
	waitFor(t, &out, "(Ctrl-C again to leave, or Ctrl-D or /exit)\n> ")
	now = now.Add(c.ExitWindow / 2)
	ints <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("REPL after a second Ctrl-C: %v", err)
	}
	want := "> Once upon\n⏹ Stopped.\n> echo after\n> \n(Ctrl-C again to leave, or Ctrl-D or /exit)\n> \n"
	if out.String() != want {
		t.Errorf("REPL printed %q, want %q", out.String(), want)
	}
}

func TestREPLExitWords(t *testing.T) {
	for _, w := range exitWords {
		t.Run(w, func(t *testing.T) {
			b := bus.New(16)
			runAgent(t, b, func(m bus.InboundMessage) []bus.OutboundMessage {
				return []bus.OutboundMessage{{Kind: bus.KindFinal, Content: "echo " + m.Content}}
			})
			var out bytes.Buffer
			if err := New(b, &out).REPL(context.Background(), strings.NewReader(w+"\nnever\n"), "> "); err != nil {
				t.Fatal(err)
			}
			if out.String() != "> " {
				t.Errorf("printed %q after %s", out.String(), w)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe to read while the REPL writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until out ends with suffix.
func waitFor(t *testing.T, out *syncBuffer, suffix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(out.String(), suffix) {
		if time.Now().After(deadline) {
			t.Fatalf("printed %q, waiting for it to end with %q", out.String(), suffix)
		}
		time.Sleep(2 * time.Millisecond) // polling the output
	}
}
