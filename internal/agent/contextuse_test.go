package agent

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// /context lists what the model is sent, part by part: its system prompt
// sections are the prompt the model received, byte for byte; its tool
// schemas are the tools the model was offered; its history is what the next
// call sends before the new message; and each figure in the answer is the
// estimate of that part. /status's context line is /context's total.
func TestContextIsWhatTheModelIsSent(t *testing.T) {
	h := newHarness(t)
	h.writeFile("AGENTS.md", "Be brief. Use tools when they help.")
	h.writeFile("SOUL.md", "Curious and kind.")
	h.writeFile("USER.md", "Name: Ada. Lives in Berlin.")
	h.writeFile("memory/MEMORY.md", "- Ada prefers metric units.\n- Ada's cat is called Turing.")
	h.writeFile("skills/pinned/SKILL.md", "---\nname: pinned\ndescription: always on\nalways: true\n---\nAlways greet Ada by name.")
	h.writeFile("notes.md", strings.Repeat("a line of notes, with a few words in it\n", 40))
	h.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "r1", Name: "read_file", Args: `{"path":"notes.md"}`}}},
		fakellm.Reply{Text: "I read your notes."})
	h.send("c1", "read my notes")
	h.waitFinals("c1", 1)
	first := h.script.Requests()[0]

	snap, err := h.store.Get("test:c1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := h.agent.promptUseOf(snap)
	if err != nil {
		t.Fatal(err)
	}
	sections, err := h.agent.prompt.Sections()
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	var names []string
	for _, s := range sections {
		joined.WriteString(s.Text)
		names = append(names, s.Name)
	}
	if joined.String() != first.System {
		t.Fatalf("the sections joined are not the system prompt the model received:\n%s\n---\n%s", joined.String(), first.System)
	}
	want := []string{SectionIdentity, "AGENTS.md", "SOUL.md", "USER.md", MemoryFile, SectionActiveSkills, SectionSkills}
	if !slices.Equal(names, want) {
		t.Errorf("sections %v, want %v (TOOLS.md is missing, so it has none)", names, want)
	}
	if u.system != history.EstimateText(first.System) {
		t.Errorf("system prompt %d tokens, want the estimate of what was sent, %d", u.system, history.EstimateText(first.System))
	}
	var tools []string
	for _, tu := range u.tools {
		tools = append(tools, tu.name)
	}
	slices.Sort(tools)
	sent := slices.Sorted(slices.Values(first.Tools))
	if !slices.Equal(tools, sent) || u.toolTokens != specTokens(h.reg.Specs()) {
		t.Errorf("tools %v (%d tokens), the model was offered %v", tools, u.toolTokens, sent)
	}
	if u.view.Levels[llm.Live].Messages != 1 || u.lastInput == 0 || u.route != "openai/gpt-4o-mini" || u.window != 128_000 {
		t.Errorf("report %+v: want one live tool result, the provider's last input count, the default route's window", u)
	}

	reply := h.command("c1", "/context")
	lines := []string{
		fmt.Sprintf("What the next call to openai/gpt-4o-mini sends (window 128,000 tokens, %s of them kept for the answer):", thousands(h.agent.cfg.MaxTokens)),
		"System prompt: " + thousands(u.system),
		"• AGENTS.md: " + thousands(history.EstimateText(sections[1].Text)),
		"• memory/MEMORY.md: " + thousands(history.EstimateText(sections[4].Text)),
		"pinned): " + thousands(history.EstimateText(sections[5].Text)),
		fmt.Sprintf("Tool schemas: %d tools, %s (largest: ", len(sent), thousands(u.toolTokens)),
		fmt.Sprintf("History: %d of 4 messages, %s", len(u.view.Messages), thousands(u.historyTokens)),
		fmt.Sprintf("• tool results and long inputs sent as live 1 (%s)", thousands(u.view.Levels[llm.Live].Tokens)),
		fmt.Sprintf("Total: %s of 128,000 tokens (%s)", thousands(u.total()), percent(u.total(), 128_000)),
		"The provider counted " + thousands(u.lastInput) + " input tokens for this chat's last call.",
	}
	for _, l := range lines {
		if !strings.Contains(reply, l) {
			t.Errorf("/context lacks %q:\n%s", l, reply)
		}
	}
	if !strings.HasSuffix(reply, EstimateMethod) {
		t.Errorf("/context does not end with how it estimates:\n%s", reply)
	}
	if status := h.command("c1", "/status"); !strings.Contains(status,
		fmt.Sprintf("Context: %s of 128,000 tokens (%s), estimated for the next call", thousands(u.total()), percent(u.total(), 128_000))) {
		t.Errorf("/status's context line is not /context's total %d:\n%s", u.total(), status)
	}

	// The next call sends that history, and the new message after it.
	h.script.Push(fakellm.Reply{Text: "ok"})
	h.send("c1", "thanks")
	h.waitFinals("c1", 2)
	reqs := h.script.Requests()
	if next := reqs[len(reqs)-1]; len(next.Messages) != len(u.view.Messages)+1 {
		t.Errorf("the next call sent %d messages, /context said %d before the new one", len(next.Messages), len(u.view.Messages))
	}
}

// Under a budget that degrades detail, /context counts the tool results at
// the level the model is sent them: as many whole as the last call sent
// whole, the rest shortened.
func TestContextCountsLevelsOfDetail(t *testing.T) {
	body := strings.Repeat("a line of the file under review, with a few words in it\n", 135)
	probe := newHarness(t)
	system, _, err := probe.agent.prompt.BuildEstimated()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.HistoryBudget = history.EstimateText(system) + 6000 })
	h.writeFile("big.md", body)
	var replies []fakellm.Reply
	for i := range 8 {
		replies = append(replies, fakellm.Reply{ToolCalls: []fakellm.Call{{ID: fmt.Sprintf("r%d", i), Name: "read_file", Args: `{"path":"big.md"}`}}})
	}
	h.script.Push(append(replies, fakellm.Reply{Text: "done"})...)
	h.send("c1", "read big.md eight times")
	h.waitFinals("c1", 1)
	reqs := h.script.Requests()
	whole := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults[0].Content
	live, short := 0, 0
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, r := range m.ToolResults {
			if r.Content == whole {
				live++
			} else {
				short++
			}
		}
	}
	snap, err := h.store.Get("test:c1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := h.agent.promptUseOf(snap)
	if err != nil {
		t.Fatal(err)
	}
	lv := u.view.Levels
	if short == 0 || lv[llm.Live].Messages != live || lv[llm.Summary].Messages+lv[llm.Gist].Messages != short {
		t.Fatalf("levels %+v; the last call sent %d results whole and %d shortened", lv, live, short)
	}
	reply := h.command("c1", "/context")
	levels := regexp.MustCompile(`• tool results and long inputs sent as (.*)\n`).FindStringSubmatch(reply)
	if levels == nil || !strings.Contains(levels[1], fmt.Sprintf("live %d (", live)) {
		t.Errorf("/context's levels line is not the projection's %+v:\n%s", lv, reply)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 128_000: "128,000", 1_047_576: "1,047,576", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
