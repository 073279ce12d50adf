package history

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Helpers that build sessions for the tests and benchmarks, deterministic
// for a given seed.

func user(s string) llm.Message      { return llm.NewText(llm.RoleUser, s) }
func assistant(s string) llm.Message { return llm.NewText(llm.RoleAssistant, s) }

func call(ids ...string) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant}
	for _, id := range ids {
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"notes/` + id + `.md"}`)}})
	}
	return m
}

func results(ids ...string) llm.Message {
	m := llm.Message{Role: llm.RoleTool}
	for _, id := range ids {
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: id, Name: "read_file", Content: llm.PlainContent("r" + id)}})
	}
	return m
}

// lines is n numbered lines of text, about 60 bytes each.
func lines(tag string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s line %03d: the quick brown fox jumps over the lazy dog\n", tag, i)
	}
	return b.String()
}

// toolStep is the assistant message of one model step, calling tools.
func toolStep(t0 time.Time, calls ...llm.ToolCall) llm.Message {
	a := llm.Message{Role: llm.RoleAssistant, Time: t0, Meta: &llm.Meta{Provider: "openai", API: "openai", Model: "gpt-4o-mini"}}
	for i := range calls {
		a.Parts = append(a.Parts, llm.Part{Kind: llm.PartToolCall, Call: &calls[i]})
	}
	return a
}

// toolMessage stores outputs (one per call) the way the agent does.
func toolMessage(t0 time.Time, calls []llm.ToolCall, outputs []string, isErr []bool) llm.Message {
	m := llm.Message{Role: llm.RoleTool, Time: t0}
	for i, c := range calls {
		r := llm.ToolResult{ToolCallID: c.ID, Name: c.Name, Content: llm.PlainContent(outputs[i]), IsError: isErr != nil && isErr[i]}
		r.Content = Detail(c, r)
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, Result: &r})
	}
	return m
}

// userText stores a user message the way the agent does, with the shorter
// renderings of a long text.
func userText(t0 time.Time, s string) llm.Message {
	p := llm.Text(s)
	p.Summary, p.Gist = DetailText(s)
	return llm.Message{Role: llm.RoleUser, Time: t0, Parts: []llm.Part{p}}
}

// genSession returns turns user turns of a plausible session: questions,
// tool steps with small and large outputs, parallel calls, errors, images,
// pasted documents and thinking. prefix makes call ids unique per session.
func genSession(seed uint64, prefix string, turns int) []llm.Message {
	rng := rand.New(rand.NewPCG(seed, 7))
	t0 := time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)
	var out []llm.Message
	callN := 0
	for t := 0; t < turns; t++ {
		t0 = t0.Add(time.Duration(1+rng.IntN(300)) * time.Second)
		text := fmt.Sprintf("[%s] question %d: what is in my notes about topic %d?", t0.Format(time.DateTime), t, rng.IntN(50))
		if rng.IntN(12) == 0 {
			text += "\n" + lines(fmt.Sprintf("pasted%d", t), 30+rng.IntN(60))
		}
		u := userText(t0, text)
		if rng.IntN(15) == 0 {
			u.Parts = append(u.Parts, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: fmt.Sprintf("inbox/%s-%d.png", prefix, t)}})
		}
		out = append(out, u)
		for step := rng.IntN(4); step > 0; step-- {
			var calls []llm.ToolCall
			for k := 1 + rng.IntN(2); k > 0; k-- {
				callN++
				calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("%s_%d", prefix, callN), Name: "read_file",
					Arguments: json.RawMessage(fmt.Sprintf(`{"path":"notes/%d.md","limit":%d}`, rng.IntN(100), 100+rng.IntN(900)))})
			}
			a := toolStep(t0, calls...)
			if rng.IntN(3) == 0 {
				a.Parts = append([]llm.Part{{Kind: llm.PartThinking, Text: "I should read the notes first.", Signature: "sig"}}, a.Parts...)
			}
			outputs := make([]string, len(calls))
			isErr := make([]bool, len(calls))
			for k := range calls {
				switch rng.IntN(6) {
				case 0:
					outputs[k], isErr[k] = "error: file not found", true
				case 1, 2:
					outputs[k] = lines(calls[k].ID, 40+rng.IntN(200))
				default:
					outputs[k] = lines(calls[k].ID, 1+rng.IntN(5))
				}
			}
			out = append(out, a, toolMessage(t0, calls, outputs, isErr))
		}
		out = append(out, llm.Message{Role: llm.RoleAssistant, Time: t0, Parts: []llm.Part{llm.Text(fmt.Sprintf("Here is what I found for question %d.", t))},
			Meta: &llm.Meta{Provider: "openai", API: "openai", Model: "gpt-4o-mini", Usage: llm.Usage{InputTokens: 100, OutputTokens: 20}}})
	}
	return out
}
