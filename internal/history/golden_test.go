package history

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// mixedSession is a hand-made session with every kind of entry: large and
// small tool outputs, an error, parallel calls, thinking, a pasted
// document, images in an older and in the newest turn, and more
// observations than the Summary band holds.
func mixedSession() []llm.Message {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	tick := func() time.Time { t0 = t0.Add(time.Minute); return t0 }
	rf := func(id, path string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"` + path + `"}`)}
	}
	step := func(calls []llm.ToolCall, outputs []string, isErr []bool) []llm.Message {
		at := tick()
		return []llm.Message{toolStep(at, calls...), toolMessage(at, calls, outputs, isErr)}
	}
	answer := func(s string) llm.Message {
		return llm.Message{Role: llm.RoleAssistant, Time: tick(), Parts: []llm.Part{llm.Text(s)}, Meta: &llm.Meta{Provider: "openai", API: "openai", Model: "gpt-4o-mini"}}
	}
	var s []llm.Message
	add := func(m ...llm.Message) { s = append(s, m...) }

	add(userText(tick(), "hi, can you read my notes?"))
	add(step([]llm.ToolCall{rf("r1", "notes.md")}, []string{lines("notes", 200)}, nil)...)
	add(answer("Your notes are about the garden."))

	cat := userText(tick(), "what is in this picture?")
	cat.Parts = append(cat.Parts, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/jpeg", Path: "inbox/cat.jpg"}})
	add(cat, answer("A cat on a windowsill."))

	add(userText(tick(), "please check this log:\n"+lines("log", 80)))
	think := step([]llm.ToolCall{{ID: "e1", Name: "exec", Arguments: json.RawMessage(`{"command":"make test"}`)}},
		[]string{"exit status 2\n" + lines("FAIL", 40)}, []bool{true})
	think[0].Parts = append([]llm.Part{{Kind: llm.PartThinking, Text: "The log shows a failing test; run it.", Signature: "sig-1"}}, think[0].Parts...)
	add(think...)
	add(step([]llm.ToolCall{{ID: "l1", Name: "list_dir", Arguments: json.RawMessage(`{"path":"src"}`)}, rf("l2", "src/main.go")},
		[]string{"main.go\nutil.go\n", lines("main.go", 120)}, nil)...)
	add(answer("The test fails because util.go is missing a function."))

	for k := 1; k <= 6; k++ {
		add(userText(tick(), fmt.Sprintf("show me part %d", k)))
		add(step([]llm.ToolCall{rf(fmt.Sprintf("p%d", k), fmt.Sprintf("part%d.md", k))}, []string{lines(fmt.Sprintf("part%d", k), 20*k)}, nil)...)
		add(answer(fmt.Sprintf("Part %d is done.", k)))
	}

	newest := userText(tick(), "and what about this one?")
	newest.Parts = append(newest.Parts, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Path: "inbox/new.png"}})
	add(newest)
	add(step([]llm.ToolCall{rf("n1", "new.md")}, []string{lines("new", 100)}, nil)...)
	return s
}

// orphanSession starts in the middle of a turn (an orphan result and a
// reply), loses a result mid-history and holds a result nobody asked for.
func orphanSession() []llm.Message {
	s := []llm.Message{results("x0"), assistant("(reply to a turn that is gone)")}
	s = append(s, user("first question"), call("a1", "a2"), results("a2", "zz"), assistant("answered"))
	s = append(s, user("second question"), call("b1"))
	s = append(s, user("third question"), call("c1"), results("c1"), assistant("done"))
	return s
}

func TestProjectGolden(t *testing.T) {
	mixed := mixedSession()
	tests := []struct {
		name   string
		msgs   []llm.Message
		budget int
	}{
		{"mixed_unlimited", mixed, 0},
		{"mixed_tight", mixed, 5000},
		{"mixed_degraded", mixed, 2400},
		{"mixed_newest_only", mixed, 600},
		// The agent projects from the consolidation offset, which may fall
		// inside a turn (here: on the exec call's result, an orphan).
		{"consolidated", mixed[8:], 0},
		{"orphan_start", orphanSession(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Project("You are nanobot.", tt.msgs, Options{Budget: tt.budget})
			got := renderView(v, tt.msgs, tt.budget)
			golden.Check(t, filepath.Join("testdata", tt.name+".golden"), []byte(got))
			checkView(t, v, tt.msgs, tt.budget)
		})
	}
}

// renderView prints a projection for review: one block per message, each
// tool result and user text labelled with the rendering it holds. Long
// texts show their first and last lines and a hash of all their bytes, so
// any change to what is sent changes the golden file.
func renderView(v View, input []llm.Message, budget int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "budget %d · tokens %d · omitted %d · steps %d (this call: %v)\n", budget, v.Tokens, v.Omitted, v.Steps, v.Stepped)
	fmt.Fprintf(&b, "system: %q\n", v.System)
	for _, m := range v.Messages {
		fmt.Fprintf(&b, "\n%s:\n", m.Role)
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartText:
				fmt.Fprintf(&b, "  text [%s] %s\n", userLabel(p.Text, input), excerpt(p.Text))
			case llm.PartThinking:
				fmt.Fprintf(&b, "  thinking %q signature %q\n", p.Text, p.Signature)
			case llm.PartImage:
				fmt.Fprintf(&b, "  image %s\n", p.Image.Path)
			case llm.PartToolCall:
				fmt.Fprintf(&b, "  call %s %s %s\n", p.Call.ID, p.Call.Name, p.Call.Arguments)
			case llm.PartToolResult:
				r := p.Result
				fmt.Fprintf(&b, "  result %s %s error=%v images=%d [%s] %s\n", r.ToolCallID, r.Name, r.IsError, len(r.Images),
					resultLabel(r, input), excerpt(r.Content.Live))
			}
		}
	}
	return b.String()
}

func excerpt(s string) string {
	ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(ls) <= 4 {
		return fmt.Sprintf("%q", s)
	}
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("(%d bytes, %d lines, sha256 %x)\n    | %s\n    | %s\n    | …\n    | %s\n    | %s",
		len(s), len(ls), sum[:4], ls[0], ls[1], ls[len(ls)-2], ls[len(ls)-1])
}

// resultLabel names the stored rendering a projected result holds.
func resultLabel(r *llm.ToolResult, input []llm.Message) string {
	for _, m := range input {
		for _, in := range m.ToolResults() {
			if in.ToolCallID == r.ToolCallID {
				return levelName(in.Content, r.Content.Live)
			}
		}
	}
	return "synthetic"
}

func userLabel(text string, input []llm.Message) string {
	for _, m := range input {
		for _, p := range m.Parts {
			if p.Kind == llm.PartText && (p.Text == text || p.Summary == text || p.Gist == text) {
				return levelName(llm.Content{Live: p.Text, Summary: p.Summary, Gist: p.Gist}, text)
			}
		}
	}
	return "note"
}

func levelName(c llm.Content, s string) string {
	var names []string
	for _, l := range []llm.Level{llm.Live, llm.Summary, llm.Gist} {
		if c.At(l) == s {
			names = append(names, l.String())
		}
	}
	if len(names) == 0 {
		return "changed!"
	}
	return strings.Join(names, "=")
}
