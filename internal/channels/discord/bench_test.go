package discord_test

import (
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
)

// BenchmarkRender5000 renders and chunks a 5,000-character answer with a
// code block, as every long reply is.
func BenchmarkRender5000(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 3500 {
		sb.WriteString("A paragraph of ordinary prose that goes on for a while. ")
		if sb.Len()%400 < 60 {
			sb.WriteString("\n\n")
		}
	}
	sb.WriteString("\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\n")
	for sb.Len() < 5000 {
		sb.WriteString("fmt.Println(\"code\")\n")
	}
	sb.WriteString("```\n")
	md := sb.String()
	r := discord.NewRenderer(0)
	b.ReportAllocs()
	for b.Loop() {
		if len(r.RenderChunks(md)) < 3 {
			b.Fatal("too few chunks")
		}
	}
}

// BenchmarkInboundDM measures one DM from the fake gateway to the bus:
// JSON decode in discordgo, the lane hand-off, the intake and the publish.
func BenchmarkInboundDM(b *testing.B) {
	e := start(b, setup{quiet: true, deps: func(d *discord.Deps) { d.Limits.RatePerMinute = 1 << 30 }})
	alice := e.fake.NewUser("alice")
	dm := e.fake.AddDM(alice)
	b.ReportAllocs()
	for b.Loop() {
		e.fake.SendMessageCreate(discordfake.Incoming{ChannelID: dm, Author: alice, Content: "hello"})
		<-e.bus.Inbound()
	}
}
