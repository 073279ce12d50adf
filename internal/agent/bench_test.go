package agent

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
	"github.com/nanobot-go/nanobot/internal/testkit/wstest"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// BenchmarkTurn is one whole turn in process: the inbound message on the
// bus, the user message persisted (fsync), the system prompt, the
// projection of the session, a model streaming a short reply in 8-byte
// deltas, the turn persisted (fsync) and the final reply on the bus. No
// HTTP: bench/cmd/nanobot-bench measures the gateway with its wire protocols.
// prior is the number of messages already in the session; every turn gets a
// fresh session of that length (seeded with the timer stopped), so the
// figure does not drift as the benchmark's own turns pile up.
//
// The model is cannedModel, not fakellm.Streamer: the fake converts every
// request into its test record, a cost of O(history) that is the fake's,
// not the agent's.
func BenchmarkTurn(b *testing.B) {
	for _, prior := range []int{10, 10000} {
		b.Run("prior="+strconv.Itoa(prior), func(b *testing.B) { benchTurn(b, prior) })
	}
}

func benchTurn(b *testing.B, prior int) {
	ws := b.TempDir()
	log := zap.NewNop()
	store := session.NewStore(filepath.Join(ws, "sessions"), session.Options{CacheSize: config.Defaults().Agents.SessionCache, CacheBytes: config.Defaults().Agents.SessionCacheBytes}, log)
	defer func() { _ = store.Close() }()
	history := benchHistory(prior)
	root, err := workspace.OpenRoot(ws, workspace.Options{Restrict: true})
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	out := bus.New(64)
	reg := tools.NewRegistry(tools.RegistryOptions{Timeout: 5 * time.Second, MaxOutput: config.Defaults().Agents.MaxToolOutput}, log)
	for _, tool := range []tools.Tool{tools.NewReadFile(root), tools.NewWriteFile(root), tools.NewEditFile(root),
		tools.NewListDir(root), tools.NewMessage(out, func(string, string) bool { return false }, root)} {
		if err := reg.Register(tool); err != nil {
			b.Fatal(err)
		}
	}
	router := provider.NewRouter(map[string]provider.Streamer{"openai": cannedModel{}},
		provider.Options{Default: "openai/gpt-4o-mini", MaxRetries: map[string]int{"openai": 0}}, log)
	ag := New(defaultConfig(ws, "bench"),
		Deps{Model: router, Sessions: store, Tools: reg, Out: out, Prompt: &PromptBuilder{Workspace: ws, Files: wstest.Files(b, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "bench"}}, log)

	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = ag.Run(ctx, out.Inbound())
	}()
	finals := make(chan bus.OutboundMessage, 1)
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		for m := range out.Outbound() {
			if m.Kind == bus.KindFinal {
				finals <- m
			}
		}
	}()
	defer func() {
		out.CloseInbound()
		<-agentDone
		cancel()
		out.CloseOutbound()
		<-outDone
	}()

	turn := func(i int) {
		chat := strconv.Itoa(i)
		b.StopTimer()
		if _, err := store.Append("bench:"+chat, history...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		m := bus.InboundMessage{Channel: "bench", ChatID: chat, SenderID: "u1", MessageID: "m" + chat,
			Content: "How are things going today? Tell me something short."}
		if err := out.PublishInbound(ctx, m); err != nil {
			b.Fatal(err)
		}
		if f := <-finals; f.IsError || f.Content == "" {
			b.Fatalf("turn %d failed: %q", i, f.Content)
		}
	}
	turn(-1) // reads the prompt's files once
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		turn(i)
	}
}

// BenchmarkPromptBuild is the system prompt of a turn when nothing changed:
// a workspace with every bootstrap file, a memory and eight skills, its
// files last written an hour ago, and the built-in skills.
func BenchmarkPromptBuild(b *testing.B) {
	ws := b.TempDir()
	for _, f := range append(slices.Clone(BootstrapFiles), MemoryFile) {
		writeWS(b, ws, f, strings.Repeat("Some rules and facts of this workspace. ", 50))
	}
	for i := range 8 {
		writeWS(b, ws, "skills/s"+strconv.Itoa(i)+"/SKILL.md", skillMD("skill number "+strconv.Itoa(i)))
	}
	age(b, ws)
	pb := &PromptBuilder{Workspace: ws, Files: wstest.Files(b, ws), MaxFileChars: config.Defaults().Agents.BootstrapMaxChars, Version: "bench", Skills: skills.Loader{Builtin: builtin.FS()}}
	if _, _, err := pb.BuildEstimated(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := pb.BuildEstimated(); err != nil {
			b.Fatal(err)
		}
	}
}

// cannedModel streams the same short reply to every request, the way the
// provider adapters deliver it: start, text in 8-byte deltas, usage, done.
type cannedModel struct{}

const cannedReply = "Noted, I will keep that in mind. Anything else you want me to look at today?"

func (cannedModel) Stream(_ context.Context, req llm.Request) iter.Seq[llm.Delta] {
	return func(yield func(llm.Delta) bool) {
		seq := 0
		emit := func(d llm.Delta) bool {
			seq++
			d.Seq = seq
			return yield(d)
		}
		if !emit(llm.Delta{Kind: llm.DeltaStart, Meta: &llm.Meta{Provider: "openai", API: "bench", Model: req.Model}}) {
			return
		}
		for text := cannedReply; text != ""; {
			n := min(8, len(text))
			if !emit(llm.Delta{Kind: llm.DeltaText, Text: text[:n]}) {
				return
			}
			text = text[n:]
		}
		if emit(llm.Delta{Kind: llm.DeltaUsage, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 20}}) {
			emit(llm.Delta{Kind: llm.DeltaDone, StopReason: "stop"})
		}
	}
}

// benchHistory is a conversation of n messages of the sizes a chat has.
func benchHistory(n int) []llm.Message {
	msgs := make([]llm.Message, n)
	at := time.Now().Add(-time.Duration(n) * time.Minute)
	for i := range msgs {
		if i%2 == 0 {
			text := fmt.Sprintf("[Mon 2026-01-05 10:00 UTC · bench · chat 1]\n%s", strings.Repeat("a short question ", 6))
			msgs[i] = llm.Message{Role: llm.RoleUser, Time: at, Parts: []llm.Part{llm.Text(text)}}
		} else {
			msgs[i] = llm.Message{Role: llm.RoleAssistant, Time: at, Parts: []llm.Part{llm.Text(strings.Repeat("an answer of some length ", 18))}}
		}
	}
	return msgs
}
