package discord_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

func TestDMRoundTripOverRESTAndGateway(t *testing.T) {
	t.Parallel()
	e := start(t, setup{})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	id := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "hello bot"})
	in := e.inbound()
	if in.Channel != "discord" || in.ChatID != dm || in.SenderID != alice.ID || in.MessageID != id ||
		in.Content != "hello bot" || in.Key() != "discord:"+dm || in.Metadata["is_group"] != "false" {
		t.Fatalf("inbound = %+v", in)
	}
	sent, err := e.ch.Send(context.Background(), channels.Outgoing{ChatID: dm, Text: "hi **alice**", ReplyTo: id})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := e.fake.WaitMessages(t, dm, 1)
	if got[0].ID != sent.MessageID || got[0].Content != "hi **alice**" || got[0].Reference == nil ||
		got[0].Reference.MessageID != id {
		t.Errorf("sent %+v", got[0])
	}
	if am := got[0].AllowedMentions; am == nil || len(am.Parse) != 0 || am.Parse == nil {
		t.Errorf("allowed_mentions = %+v, want parse: []", am)
	}
	if err := e.ch.Edit(context.Background(), sent, "edited", false); err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if err := e.ch.Typing(context.Background(), dm, nil); err != nil {
		t.Fatalf("Typing: %v", err)
	}
	if err := e.ch.Delete(context.Background(), sent); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := e.ch.Delete(context.Background(), sent); err != nil {
		t.Errorf("second Delete: %v, want nil (already gone)", err)
	}
	m := e.fake.Messages(dm)[0]
	if m.Edits != 1 || m.Content != "edited" || !m.Deleted || e.fake.Typing(dm) != 1 {
		t.Errorf("after edit/typing/delete: %+v typing=%d", m, e.fake.Typing(dm))
	}
	if st := e.fake.Stats(); st.Intents != int(discord.Intents) || st.IdentifyCompress {
		t.Errorf("identified with intents %d compress %v", st.Intents, st.IdentifyCompress)
	}
	if err := e.ch.Healthy(); err != nil {
		t.Errorf("Healthy: %v", err)
	}
}

func TestGatewayRecovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		break_    func(*discordfake.Server)
		resumes   int // RESUMEs expected afterwards
		identifys int // IDENTIFYs expected afterwards (the first included)
	}{
		{"abrupt disconnect", (*discordfake.Server).DropConnections, 1, 1},
		{"op 7 reconnect", (*discordfake.Server).Reconnect, 1, 1},
		{"op 9 not resumable", func(s *discordfake.Server) { s.InvalidateSessions(false) }, 0, 2},
		{"op 9 resumable", func(s *discordfake.Server) { s.InvalidateSessions(true) }, 0, 2},
		{"close 4000", func(s *discordfake.Server) { s.CloseConnections(discordfake.CloseUnknownError, "Unknown error.") }, 1, 1},
		{"close 4009 session timed out", func(s *discordfake.Server) {
			s.CloseConnections(discordfake.CloseSessionTimedOut, "Session timed out.")
		}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, setup{})
			alice := e.fake.NewUser("alice")
			dm := e.fake.AddDM(alice)
			e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "before"})
			e.inboundIs("before")

			tt.break_(e.fake)
			// A message sent while the bot is away is replayed on RESUME,
			// or fetched by the catch-up of a new session.
			e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "during"})
			e.fake.WaitFor(t, "recovery", func() bool {
				st := e.fake.Stats()
				return st.Resumes >= tt.resumes && st.Identifies >= tt.identifys && st.Live == 1
			})
			e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "after"})
			seen := map[string]int{}
			for seen["after"] == 0 {
				seen[e.inbound().Content]++
			}
			for k, n := range seen {
				if n > 1 {
					t.Errorf("%q delivered %d times", k, n)
				}
			}
			if seen["during"] == 0 {
				// The catch-up may still be fetching it.
				seen[e.inbound().Content]++
			}
			if seen["during"] != 1 {
				t.Errorf("message sent during the outage delivered %d times, want 1 (resume or catch-up)", seen["during"])
			}
			if err := e.ch.Healthy(); err != nil {
				t.Errorf("Healthy after recovery: %v", err)
			}
			st := e.fake.Stats()
			if st.Resumes != tt.resumes || st.Identifies != tt.identifys {
				t.Errorf("resumes %d identifies %d, want %d and %d", st.Resumes, st.Identifies, tt.resumes, tt.identifys)
			}
		})
	}
}

func TestDisallowedIntentStopsWithAClearError(t *testing.T) {
	t.Parallel()
	e := start(t, setup{fake: discordfake.Options{DisallowMessageContent: true}, noWait: true})
	err := e.runEnds()
	if err == nil || !strings.Contains(err.Error(), "Message Content intent") {
		t.Fatalf("Run = %v, want the 4014 advice", err)
	}
	if n := e.fake.Stats().Connections; n != 1 {
		t.Errorf("%d connections, want 1 (no retry loop on a fatal close)", n)
	}
}

func TestBadTokenStops(t *testing.T) {
	t.Parallel()
	e := start(t, setup{noWait: true, cfg: func(c *discord.Config) { c.Token = "wrong" }})
	if err := e.runEnds(); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Run = %v, want an authentication error naming the token", err)
	}
}

func TestSendErrorsAreClassified(t *testing.T) {
	t.Parallel()
	e := start(t, setup{})
	dm := e.fake.AddDM(e.fake.NewUser("alice"))
	ctx := context.Background()

	// Limits far longer than a loaded machine can stall between two calls:
	// the second call must find the route (and later every route) blocked.
	e.fake.Fail(discordfake.RouteCreateMessage, discordfake.Failure{Status: 429, RetryAfter: 5})
	_, err := e.ch.Send(ctx, channels.Outgoing{ChatID: dm, Text: "x"})
	var rl *channels.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 5*time.Second {
		t.Fatalf("429: %v, want RateLimitError of 5s", err)
	}
	// The route stays blocked until retry_after passed: no second request.
	posts := func() int {
		n := 0
		for _, r := range e.fake.Requests() {
			if r.Route == discordfake.RouteCreateMessage && strings.Contains(r.Path, "/"+dm+"/") {
				n++
			}
		}
		return n
	}
	before := posts()
	if before != 1 {
		t.Fatalf("%d posts to the DM seen, want the rate-limited one", before)
	}
	if _, err := e.ch.Send(ctx, channels.Outgoing{ChatID: dm, Text: "x"}); !errors.As(err, &rl) {
		t.Fatalf("send while limited: %v", err)
	}
	if after := posts(); after != before {
		t.Errorf("a request reached Discord while the route was rate limited")
	}

	other := e.fake.AddDM(e.fake.NewUser("bob"))
	e.fake.Fail(discordfake.RouteCreateMessage, discordfake.Failure{Status: 500})
	_, err = e.ch.Send(ctx, channels.Outgoing{ChatID: other, Text: "x"})
	var pe *channels.PermanentError
	var uo *channels.UnknownOutcomeError
	if err == nil || errors.As(err, &pe) || errors.As(err, &uo) || errors.As(err, &rl) {
		t.Errorf("500: %v, want a transient error", err)
	}
	_, err = e.ch.Send(ctx, channels.Outgoing{ChatID: "404404", Text: "x"})
	if !errors.As(err, &pe) {
		t.Errorf("unknown channel: %v, want PermanentError", err)
	}
	_, err = e.ch.Send(ctx, channels.Outgoing{ChatID: other, Text: strings.Repeat("x", 2001)})
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "BASE_TYPE_MAX_LENGTH") {
		t.Errorf("too long: %v, want PermanentError carrying Discord's reason", err)
	}
	e.fake.Fail(discordfake.RouteCreateMessage, discordfake.Failure{Drop: true})
	_, err = e.ch.Send(ctx, channels.Outgoing{ChatID: other, Text: "maybe"})
	if !errors.As(err, &uo) {
		t.Errorf("dropped after posting: %v, want UnknownOutcomeError", err)
	}
	e.fake.Fail(discordfake.RouteEditMessage, discordfake.Failure{Status: 429, RetryAfter: 5, Global: true})
	if err := e.ch.Edit(ctx, channels.Sent{ChatID: other, MessageID: "1"}, "x", false); !errors.As(err, &rl) {
		t.Errorf("global 429 on edit: %v", err)
	}
	// A global limit blocks every route.
	if err := e.ch.Typing(ctx, other, nil); !errors.As(err, &rl) {
		t.Errorf("typing during a global limit: %v, want RateLimitError", err)
	}
}

func TestReconnectBackoff(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake()
	e := start(t, setup{deps: func(d *discord.Deps) { d.Clock = clk }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The connection dropped right after it was made: wait before retrying
	// (1 s, jittered down to no less than half).
	e.fake.DropConnections()
	if !clk.WaitForTimers(ctx, 1) {
		t.Fatal("no backoff timer armed after a quick drop")
	}
	if d, _ := clk.NextDeadline(); d < 500*time.Millisecond || d > time.Second {
		t.Errorf("backoff %s, want between 0.5 and 1 s", d)
	}
	if n := e.fake.Stats().Resumes; n != 0 {
		t.Fatalf("reconnected (%d resumes) before the backoff passed", n)
	}
	clk.Advance(time.Second)
	e.fake.WaitResumed(t, 1)
	e.waitHealthy()

	// A connection that stayed up for minutes comes back at once.
	clk.Advance(5 * time.Minute)
	e.fake.DropConnections()
	e.fake.WaitResumed(t, 2)
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers armed; a long-lived connection should reconnect without waiting", n)
	}
}

func TestZombieConnectionDetected(t *testing.T) {
	t.Parallel()
	// Heartbeats every 50 ms: discordgo gives up on a connection after five
	// intervals without an ACK.
	e := start(t, setup{fake: discordfake.Options{HeartbeatInterval: 50 * time.Millisecond}})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.Blackhole()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "sent into the void"})
	e.fake.WaitResumed(t, 1)
	e.inboundIs("sent into the void") // replayed on RESUME
	if st := e.fake.Stats(); st.Identifies != 1 {
		t.Errorf("%d IDENTIFYs, want 1: the session should have been resumed", st.Identifies)
	}
}
