package agent

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
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
	reg := tools.NewRegistry(tools.RegistryOptions{}, zaptest.NewLogger(t))
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
