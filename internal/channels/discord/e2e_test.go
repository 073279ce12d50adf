package discord_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

// End-to-end: fake Discord gateway and REST ↔ adapter ↔ bus ↔ stand-in
// agent, with the real channel manager delivering the replies.

func TestE2EDMRoundTrip(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	id := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "hello there"})

	in := e.receivedIs("hello there")
	if in.ChatID != dm || in.SenderID != alice.ID || in.MessageID != id || in.Key() != "discord:"+dm {
		t.Errorf("agent got %+v", in)
	}
	got := e.fake.WaitMessages(t, dm, 1)
	if got[0].Content != "echo: hello there" || got[0].Reference == nil || got[0].Reference.MessageID != id {
		t.Errorf("reply = %+v, want the echo replying to the user's message", got[0])
	}
	if e.fake.Typing(dm) == 0 {
		t.Error("no typing indicator while the turn ran")
	}
}

func TestE2EGuildMentionGatingAndThreads(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	g, ch, carol := e.guild()
	thread := e.fake.AddThread(ch, "topic")

	// Without a mention: ignored. With one: answered in the channel, the
	// mention stripped.
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "just chatting"})
	asked := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: e.mention() + " what time is it?"})
	in := e.receivedIs("what time is it?")
	if in.Metadata["is_group"] != "true" || in.Metadata["guild_id"] != g || in.Key() != "discord:"+ch {
		t.Errorf("guild message = %+v", in)
	}
	reply := e.fake.WaitMessages(t, ch, 1)[0]
	if reply.Content != "echo: what time is it?" || reply.Reference.MessageID != asked {
		t.Errorf("channel reply = %+v", reply)
	}

	// A reply to the bot's message counts as addressing it, even without
	// the ping, and carries what it answers.
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "and tomorrow?", ReplyTo: reply.ID, NoReplyPing: true})
	e.receivedIs("[in reply to your earlier message: \"echo: what time is it?\"]\nand tomorrow?")

	// The bot's role mentioned.
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "<@&" + e.fake.BotRoleID(g) + "> ping"})
	e.receivedIs("ping")

	// Another role mentioned: not for the bot.
	other := e.fake.AddRole(g, "mods")
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "<@&" + other + "> ping"})

	// In a thread: its own session, answered in the thread.
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: thread, Author: carol, Content: e.mention() + " in thread"})
	in = e.receivedIs("in thread")
	if in.Key() != "discord:"+ch+":thread:"+thread || in.ChatID != thread || in.Metadata["parent_id"] != ch {
		t.Errorf("thread message = %+v", in)
	}
	if got := e.fake.WaitMessages(t, thread, 1); got[0].Content != "echo: in thread" {
		t.Errorf("thread reply = %+v", got[0])
	}
	e.fake.WaitMessages(t, ch, 3)
	if n := len(e.fake.Messages(ch)); n != 3 {
		t.Errorf("%d replies in the channel, want 3 (the thread's stays in the thread)", n)
	}
}

func TestE2EGroupPolicyOpen(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo, cfg: func(c *discord.Config) { c.GroupPolicy = "open" }})
	_, ch, carol := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "no mention needed"})
	e.receivedIs("no mention needed")
}

func TestE2EGuildAllowLists(t *testing.T) {
	t.Parallel()
	var g, other, inCh, outCh, role string
	var member, outsider discordfake.User
	e := start(t, setup{
		agent: echo,
		before: func(f *discordfake.Server) {
			g, other = f.AddGuild("g"), f.AddGuild("other")
			inCh, outCh = f.AddTextChannel(g, "bot"), f.AddTextChannel(g, "off-topic")
			role = f.AddRole(g, "team")
			member, outsider = f.NewUser("member"), f.NewUser("outsider")
			f.AddMember(g, member, role)
			f.AddMember(g, outsider)
		},
		cfg: func(c *discord.Config) {
			c.GroupPolicy = "open"
			c.AllowGuilds = []string{g}
			c.AllowChannels = []string{inCh}
			c.AllowRoles = []string{role}
		},
	})
	thread := e.fake.AddThread(inCh, "t")
	elsewhere := e.fake.AddTextChannel(other, "x")
	send := func(ch string, u discordfake.User, text string) {
		var roles []string
		if u.ID == member.ID {
			roles = []string{role}
		}
		e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: u, Roles: roles, Content: text})
	}
	send(outCh, member, "channel not in allow_channels")
	send(elsewhere, member, "guild not in allow_guilds")
	send(inCh, outsider, "member without an allow_roles role")
	send(inCh, member, "allowed")
	e.receivedIs("allowed")
	send(thread, member, "a thread of an allowed channel")
	e.receivedIs("a thread of an allowed channel")
}

func TestE2ELongAnswerIsChunked(t *testing.T) {
	t.Parallel()
	var answer strings.Builder
	answer.WriteString("Here is the plan.\n\n")
	for i := 0; answer.Len() < 3500; i++ {
		answer.WriteString("Paragraph with some words that keep going for a while, number ")
		answer.WriteString(strings.Repeat("x", i%7))
		answer.WriteString(".\n\n")
	}
	answer.WriteString("```go\n")
	for answer.Len() < 5000 {
		answer.WriteString("fmt.Println(\"a line of code inside a long fence\")\n")
	}
	answer.WriteString("```\nDone.")
	long := answer.String()
	e := start(t, setup{agent: func(bus.InboundMessage) reply { return reply{final: long} }})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "plan please"})
	e.receivedIs("plan please")
	e.fake.WaitFor(t, "the whole answer", func() bool { return strings.HasSuffix(joined(e.fake.Messages(dm)), "Done.") })
	msgs := e.fake.Messages(dm)
	if len(msgs) < 3 {
		t.Fatalf("%d messages for a %d-character answer", len(msgs), utf8.RuneCountInString(long))
	}
	for i, m := range msgs {
		if n := utf8.RuneCountInString(m.Content); n > discordMax || n == 0 {
			t.Errorf("chunk %d has %d characters", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("chunk %d leaves a code fence open:\n%s", i, m.Content)
		}
		if lines := strings.Count(m.Content, "\n") + 1; lines > 40 {
			t.Errorf("chunk %d has %d lines, over the soft cap", i, lines)
		}
		if (i == 0) != (m.Reference != nil) {
			t.Errorf("chunk %d reference %+v: only the first chunk replies", i, m.Reference)
		}
	}
	if got, want := strings.Join(strings.Fields(strings.ReplaceAll(joined(msgs), "```go", "")), ""),
		strings.Join(strings.Fields(strings.ReplaceAll(long, "```go", "")), ""); strings.ReplaceAll(got, "```", "") != strings.ReplaceAll(want, "```", "") {
		t.Errorf("text lost or changed in chunking")
	}
}

const discordMax = 2000

func TestE2EStreamingEditsOneMessage(t *testing.T) {
	t.Parallel()
	draftShown := make(chan struct{})
	e := start(t, setup{
		cfg: func(c *discord.Config) { c.Streaming = true },
		agent: func(bus.InboundMessage) reply {
			return reply{drafts: []string{"Thinking"}, gate: draftShown, final: "The **answer** is 42."}
		},
	})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "q"})
	e.fake.WaitMessages(t, dm, 1)
	close(draftShown)
	e.fake.WaitFor(t, "the final text", func() bool {
		ms := e.fake.Messages(dm)
		return len(ms) > 0 && ms[len(ms)-1].Content == "The **answer** is 42."
	})
	msgs := e.fake.Messages(dm)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the draft message edited into the answer: %+v", len(msgs), msgs)
	}
	if h := msgs[0].History; len(h) < 2 || !strings.HasPrefix(h[0], "Thinking") {
		t.Errorf("history %q: want a draft first, then edits", h)
	}
}

func TestE2EAbruptDisconnectNothingLostNothingTwice(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "one"})
	e.receivedIs("one")
	e.fake.WaitMessages(t, dm, 1)

	e.fake.DropConnections()
	missed := e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "two"})
	e.fake.WaitResumed(t, 1)
	e.receivedIs("two")
	e.fake.Redeliver(missed) // Discord repeating itself must not repeat the answer
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "three"})
	e.receivedIs("three")
	e.fake.WaitMessages(t, dm, 3)

	e.fake.Reconnect()
	e.fake.WaitResumed(t, 2)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "four"})
	e.receivedIs("four")
	e.fake.InvalidateSessions(false)
	e.fake.WaitReady(t, 2)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "five"})
	e.receivedIs("five")

	msgs := e.fake.WaitMessages(t, dm, 5)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	want := []string{"echo: one", "echo: two", "echo: three", "echo: four", "echo: five"}
	if !slices.Equal(got, want) {
		t.Errorf("replies %q, want each exactly once: %q", got, want)
	}
}

func TestE2ERateLimitHonouredAndBounded(t *testing.T) {
	t.Parallel()
	e := start(t, setup{agent: echo, manager: func(c *channels.ManagerConfig) {
		c.Retry.MaxAttempts = 3
		c.Retry.MaxWait = 150 * time.Millisecond
	}})
	alice, bob := e.fake.NewUser("alice"), e.fake.NewUser("bob")
	adm, bdm := e.fake.AddDM(alice), e.fake.AddDM(bob)
	posts := func(ch string) int {
		n := 0
		for _, r := range e.fake.Requests() {
			if r.Route == discordfake.RouteCreateMessage && strings.Contains(r.Path, "/"+ch+"/") {
				n++
			}
		}
		return n
	}

	// Two 429s (the second global), then success: the answer arrives once,
	// after waiting as told.
	e.fake.Fail(discordfake.RouteCreateMessage,
		discordfake.Failure{Status: 429, RetryAfter: 0.05, ChannelID: adm},
		discordfake.Failure{Status: 429, RetryAfter: 0.05, Global: true, ChannelID: adm})
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: adm, Author: alice, Content: "a"})
	if got := e.fake.WaitMessages(t, adm, 1); got[0].Content != "echo: a" {
		t.Fatalf("reply %+v", got[0])
	}
	if n := posts(adm); n != 3 {
		t.Errorf("%d POSTs, want 3 (two limited, one delivered)", n)
	}

	// Limited every time: 429s do not use up attempts (each says nothing was
	// sent), but the manager gives up once waiting longer would pass MaxWait.
	e.fake.Fail(discordfake.RouteCreateMessage,
		slices.Repeat([]discordfake.Failure{{Status: 429, RetryAfter: 0.02, ChannelID: bdm}}, 10)...)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: bdm, Author: bob, Content: "b"})
	e.receivedIs("a")
	e.receivedIs("b")
	_ = e.stop() // drains the manager: every attempt it will make has been made
	if n := posts(bdm); n < 2 || n > 9 {
		t.Errorf("%d POSTs for an always limited answer, want 2-9 (20 ms waits within MaxWait 150 ms)", n)
	}
	if n := len(e.fake.Messages(bdm)); n != 0 {
		t.Errorf("the always limited answer was delivered %d times", n)
	}
}

func TestE2EDeniedSenderCostsNothing(t *testing.T) {
	t.Parallel()
	var alice discordfake.User
	e := start(t, setup{
		agent:  echo,
		before: func(f *discordfake.Server) { alice = f.NewUser("alice") },
		cfg:    func(c *discord.Config) { c.AllowFrom = []string{alice.ID} },
	})
	mallory := e.fake.NewUser("mallory")
	mdm := e.fake.AddDM(mallory)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: mdm, Author: mallory, Content: "let me in",
		Attachments: []discordfake.IncomingFile{{Name: "big.bin", ContentType: "application/octet-stream", Data: []byte("payload")}}})
	_, ch, _ := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: mallory, Content: e.mention() + " hi"})
	adm := e.fake.AddDM(alice)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: adm, Author: alice, Content: "marker"})
	e.receivedIs("marker")
	for _, r := range e.fake.Requests() {
		if r.Route == discordfake.RouteAttachment {
			t.Error("a denied sender's attachment was downloaded")
		}
	}
	e.fake.WaitMessages(t, adm, 1)
	if n := len(e.fake.Messages(mdm)) + len(e.fake.Messages(ch)); n != 0 {
		t.Errorf("the bot answered a denied sender %d times", n)
	}
}

func TestE2EWhoAmIAndPairing(t *testing.T) {
	t.Parallel()
	store := channels.NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	e := start(t, setup{
		agent: echo,
		cfg:   func(c *discord.Config) { c.Policy = "pairing"; c.AllowFrom = nil },
		deps:  func(d *discord.Deps) { d.Pairing = store },
	})
	bob := e.fake.NewUser("bob")
	dm := e.fake.AddDM(bob)
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: bob, Content: "/whoami"})
	if got := e.fake.WaitMessages(t, dm, 1)[0].Content; !strings.Contains(got, bob.ID) {
		t.Errorf("/whoami answered %q, want the user id", got)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: bob, Content: "hello?"})
	code := e.fake.WaitMessages(t, dm, 2)[1].Content
	st, err := store.List()
	if err != nil || len(st.Pending) != 1 || !strings.Contains(code, st.Pending[0].Code) {
		t.Fatalf("pairing reply %q, store %+v (%v)", code, st, err)
	}
	if _, err := store.Approve(st.Pending[0].Code); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: bob, Content: "now?"})
	e.receivedIs("now?")
}

func TestE2EAttachmentsInAndOut(t *testing.T) {
	t.Parallel()
	var workspace string
	tr := &fakeTranscriber{text: "remind me to water the plants"}
	e := start(t, setup{
		agent: func(m bus.InboundMessage) reply {
			if m.Content != "send me the notes" {
				return reply{final: "ok"}
			}
			return reply{final: "here", media: []bus.OutboundMessage{{Kind: bus.KindMessage,
				Media: []llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "notes.md"}}}}}}
		},
		deps: func(d *discord.Deps) {
			workspace = d.Workspace
			d.Transcriber = tr
		},
	})
	if err := os.WriteFile(filepath.Join(workspace, "notes.md"), []byte("# notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "look", Attachments: []discordfake.IncomingFile{
		{Name: "cat.png", ContentType: "image/png", Data: png},
		{Name: "report.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4")},
		{Name: "huge.zip", ContentType: "application/zip", Data: []byte("x"), Size: 2 << 20},
	}})
	in := e.received()
	if len(in.Media) != 2 || in.Media[0].Kind != llm.PartImage || string(in.Media[0].Image.Data) != string(png) ||
		in.Media[1].Kind != llm.PartFileRef {
		t.Fatalf("media = %+v", in.Media)
	}
	saved, err := os.ReadFile(filepath.Join(workspace, in.Media[1].File.Path))
	if err != nil || string(saved) != "%PDF-1.4" || !strings.HasPrefix(in.Media[1].File.Path, "inbox/") {
		t.Errorf("file_ref %+v: %q, %v", in.Media[1].File, saved, err)
	}
	if !strings.HasPrefix(in.Content, "look") || !strings.Contains(in.Content, "huge.zip") || !strings.Contains(in.Content, "limit") {
		t.Errorf("content %q: want the text and a note about the oversized file", in.Content)
	}

	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Attachments: []discordfake.IncomingFile{
		{Name: "voice-message.ogg", ContentType: "audio/ogg", Data: []byte("OggS"), Voice: true}}})
	if in := e.received(); in.Content != "[voice message] remind me to water the plants" || len(in.Media) != 0 {
		t.Errorf("voice message arrived as %+v", in)
	}
	if tr.calls() != 1 {
		t.Errorf("transcriber called %d times", tr.calls())
	}

	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "send me the notes"})
	e.receivedIs("send me the notes")
	e.fake.WaitFor(t, "the file", func() bool {
		for _, m := range e.fake.Messages(dm) {
			if len(m.Files) == 1 && string(m.Files[0].Data) == "# notes" && m.Files[0].Name == "notes.md" {
				return true
			}
		}
		return false
	})
}

func TestE2EAllowedMentionsOnEverySend(t *testing.T) {
	t.Parallel()
	e := start(t, setup{
		cfg: func(c *discord.Config) { c.Streaming = true; c.GroupPolicy = "open" },
		agent: func(bus.InboundMessage) reply {
			return reply{drafts: []string{"@everyone look"}, final: "@everyone <@&1> <@2> hi " + strings.Repeat("word ", 500)}
		},
	})
	_, ch, carol := e.guild()
	e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: ch, Author: carol, Content: "go"})
	e.fake.WaitFor(t, "the answer", func() bool { return strings.Contains(joined(e.fake.Messages(ch)), "hi word") })
	_ = e.stop()
	var n int
	for _, r := range e.fake.Requests() {
		if r.Route != discordfake.RouteCreateMessage && r.Route != discordfake.RouteEditMessage {
			continue
		}
		n++
		var body struct {
			AllowedMentions *discordfake.AllowedMentions `json:"allowed_mentions"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.AllowedMentions == nil ||
			body.AllowedMentions.Parse == nil || len(body.AllowedMentions.Parse) != 0 {
			t.Errorf("%s %s sent allowed_mentions %+v (%v), want parse: []", r.Method, r.Path, body.AllowedMentions, err)
		}
	}
	if n < 2 {
		t.Errorf("only %d sends/edits checked", n)
	}
	for _, m := range e.fake.Messages(ch) {
		for _, p := range m.Pings {
			if !strings.HasPrefix(p, "reply:") {
				t.Errorf("message %s pinged %s", m.ID, p)
			}
		}
	}
}

func TestE2ESlashCommands(t *testing.T) {
	t.Parallel()
	var alice discordfake.User
	e := start(t, setup{
		agent:  func(m bus.InboundMessage) reply { return reply{final: "ran " + m.Content} },
		before: func(f *discordfake.Server) { alice = f.NewUser("alice") },
		cfg:    func(c *discord.Config) { c.AllowFrom = []string{alice.ID} },
	})
	// The slash commands are the command table's menu rows, in order, word
	// for word, with the argument as a string option.
	menu := commands.Menu()
	e.fake.WaitFor(t, "commands registered", func() bool { return len(e.fake.Commands()) == len(menu) })
	for i, c := range e.fake.Commands() {
		want := menu[i]
		if c["name"] != want.Name || c["description"] != want.Description {
			t.Errorf("command %d = %v, want /%s %q", i, c, want.Name, want.Description)
		}
		opts, _ := c["options"].([]any)
		if want.Arg == nil && len(opts) != 0 || want.Arg != nil && (len(opts) != 1 || opts[0].(map[string]any)["name"] != want.Arg.Name) {
			t.Errorf("command /%s options = %v, want %v", want.Name, opts, want.Arg)
		}
	}

	dm := e.fake.AddDM(alice)
	id := e.fake.SendSlashCommand(dm, alice, nil, "model", discordfake.SlashOption{Name: "name", Value: "anthropic/claude"})
	if in := e.receivedIs("/model anthropic/claude"); in.ChatID != dm || in.SenderID != alice.ID {
		t.Errorf("agent got %+v", in)
	}
	resp := e.fake.WaitInteractionResponse(t, id)
	if resp.Type != discordfake.ResponseChannelMessage || resp.Data == nil || resp.Data.Flags&discordfake.FlagEphemeral == 0 {
		t.Errorf("interaction answered with %+v, want an ephemeral message", resp)
	}
	if got := e.fake.WaitMessages(t, dm, 1)[0].Content; got != "ran /model anthropic/claude" {
		t.Errorf("answer %q", got)
	}

	// In a guild, from a stranger: refused privately, nothing reaches the agent.
	_, ch, carol := e.guild()
	id = e.fake.SendSlashCommand(ch, carol, nil, "new")
	if resp := e.fake.WaitInteractionResponse(t, id); resp.Data == nil || !strings.Contains(resp.Data.Content, "not available") {
		t.Errorf("stranger's command answered %+v", resp)
	}
	e.fake.SendSlashCommand(dm, alice, nil, "status")
	e.receivedIs("/status")
}
