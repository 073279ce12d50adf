package agent

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// specTool is a tool that only has a spec.
type specTool struct{ spec llm.ToolSpec }

func (s specTool) Spec() llm.ToolSpec { return s.spec }
func (specTool) Run(context.Context, tools.Invocation) (tools.Result, error) {
	return tools.Result{}, nil
}

// TestSpecMemoFollowsTheRegistry: the remembered estimate of the tool specs
// is always the estimate of the list given, as tools come and go and as
// other lists (a one-off turn's copy) are asked for in between.
func TestSpecMemoFollowsTheRegistry(t *testing.T) {
	reg := tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
	register := func(name, desc string) func() {
		return func() {
			err := reg.Register(specTool{llm.ToolSpec{Name: name, Description: desc, Parameters: json.RawMessage(`{"type":"object"}`)}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var memo specMemo
	steps := []struct {
		name string
		do   func()
	}{
		{"empty registry", func() {}},
		{"one tool", register("read_file", "Read a file.")},
		{"unchanged", func() {}},
		{"another tool", register("exec", "Run a shell command and return what it printed.")},
		{"a copy asked for in between", func() { memo.of(slices.Clone(reg.Specs())[:1]) }},
		{"a tool replaced by one of the same name", func() {
			reg.Unregister("read_file")
			register("read_file", "Read a text file from the workspace, a page at a time.")()
		}},
		{"a tool removed", func() { reg.Unregister("read_file") }},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.do()
			specs := reg.Specs()
			if got, want := memo.of(specs), specTokens(specs); got != want {
				t.Errorf("memo says %d tokens, the specs estimate at %d", got, want)
			}
		})
	}
}

// gatedOut holds every final publish until released, and then, like a bus
// whose caller stopped waiting, refuses it if the publish's context ended
// meanwhile. Other messages pass straight through.
type gatedOut struct {
	next    Publisher
	pending chan struct{}
	release chan struct{}
}

func (g *gatedOut) PublishOutbound(ctx context.Context, m bus.OutboundMessage) error {
	if m.Kind == bus.KindFinal {
		g.pending <- struct{}{}
		<-g.release
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return g.next.PublishOutbound(ctx, m)
}

// A final answer waiting for room on a full bus is never given up (the old
// publish dropped it after 5 s and still counted the turn as answered):
// the turn waits, however long, and the answer is delivered and the
// message acknowledged once there is room. Best-effort messages still give
// up after publishWait (here 1 ns, so an old-style deadline has long
// passed when the gate opens).
func TestFinalWaitsForRoomInsteadOfBeingDropped(t *testing.T) {
	gate := &gatedOut{pending: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarnessDeps(t, func(d *Deps) { gate.next, d.Out = d.Out, gate },
		func(c *Config) { c.publishWait = time.Nanosecond })
	h.script.Push(fakellm.Reply{Text: "Here is your answer."})
	h.send("c1", "question")
	<-gate.pending
	time.Sleep(time.Millisecond) // let a 1 ns deadline pass for certain; not a timing assertion
	close(gate.release)
	finals := h.waitFinals("c1", 1)
	if finals[0].Content != "Here is your answer." {
		t.Fatalf("final = %q", finals[0].Content)
	}
	h.mu.Lock() // the recorder calls Delivered before it keeps the final
	defer h.mu.Unlock()
	if n := h.acked["question"]; n != 1 {
		t.Fatalf("question acknowledged %d times, want once: its answer was delivered", n)
	}
}
