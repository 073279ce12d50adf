package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

// EstimateMethod is how /context and /status count tokens, for the last
// line of /context's answer: the figures are estimates, and a reader must be
// told so and told how (docs/history.md#token-estimate).
const EstimateMethod = "Tokens are estimated with nanobot's one-pass approximation of the GPT-4o tokenizer " +
	"(history.EstimateText, within about 5 % of o200k on mixed text; docs/history.md#token-estimate), " +
	"not counted by the provider."

// promptUse is what the session's next model call would send, estimated
// the way the turn estimates it (the same prompt, tool list, budget and
// projection), so that /context and /status show what the model is sent.
type promptUse struct {
	route string
	// window is the route's context window; reply is what is kept of it
	// for the answer (agents.max_tokens).
	window, reply int
	// sections are the system prompt's parts; system is the tokens of the
	// whole prompt as the turn counts them.
	sections []sectionUse
	system   int
	// tools are the tool schemas, largest first; toolTokens their total
	// as the turn counts it.
	tools      []toolUse
	toolTokens int
	// view is the history as the next call would project it (before the
	// next user message); historyTokens is its messages' share of
	// view.Tokens.
	view          history.View
	historyTokens int
	// stored is how many messages the session holds past its consolidation
	// offset; lastInput is the input tokens the provider reported for the
	// session's last call (0: none reported).
	stored, lastInput int
}

type sectionUse struct {
	name, note string
	tokens     int
}

type toolUse struct {
	name   string
	tokens int
}

// total is the estimated input of the next call: system prompt, tool
// schemas and history.
func (u promptUse) total() int { return u.system + u.toolTokens + u.historyTokens }

// promptUseOf estimates what the next model call of snap's session sends.
func (a *Agent) promptUseOf(snap session.Snapshot) (promptUse, error) {
	u := promptUse{route: a.routeOf(snap), reply: a.cfg.MaxTokens}
	u.window = a.model.ContextWindow(u.route)
	system, systemTokens, err := a.prompt.BuildEstimated()
	if err != nil {
		return promptUse{}, fmt.Errorf("build system prompt: %w", err)
	}
	u.system = systemTokens
	sections, err := a.prompt.Sections()
	if err != nil {
		return promptUse{}, fmt.Errorf("system prompt sections: %w", err)
	}
	for _, s := range sections {
		u.sections = append(u.sections, sectionUse{name: s.Name, note: s.Note, tokens: history.EstimateText(s.Text)})
	}
	specs := a.tools.Specs()
	u.toolTokens = a.toolTokens.of(specs)
	for _, s := range specs {
		u.tools = append(u.tools, toolUse{name: s.Name, tokens: specTokens([]llm.ToolSpec{s})})
	}
	slices.SortStableFunc(u.tools, func(x, y toolUse) int { return cmp.Compare(y.tokens, x.tokens) })
	// The pure projection, not the session's cached walk (textsOf): this
	// runs beside a turn of the same session, and gives the same view.
	stored := snap.Messages[snap.Consolidated:]
	u.stored = len(stored)
	u.view = history.Project(system, stored, a.projection(u.window-u.reply-u.toolTokens, systemTokens))
	u.historyTokens = u.view.Tokens - systemTokens
	for _, m := range snap.Messages {
		if m.Role == llm.RoleAssistant && m.Meta != nil && m.Meta.Usage.InputTokens > 0 {
			u.lastInput = m.Meta.Usage.InputTokens
		}
	}
	return u, nil
}

// contextReport answers /context: what fills the prompt of the session's
// next model call, in tokens, part by part.
func (a *Agent) contextReport(key string) (string, error) {
	snap, err := a.store.Get(key)
	if err != nil {
		return "I could not read this session's state; see the daemon log.", fmt.Errorf("context: %w", err)
	}
	u, err := a.promptUseOf(snap)
	if err != nil {
		return "I could not build the system prompt; see the daemon log.", fmt.Errorf("context: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "What the next call to %s sends (window %s tokens, %s of them kept for the answer):\n",
		u.route, thousands(u.window), thousands(u.reply))
	fmt.Fprintf(&b, "System prompt: %s\n", thousands(u.system))
	for _, s := range u.sections {
		name := s.name
		if s.note != "" {
			name += " (" + s.note + ")"
		}
		fmt.Fprintf(&b, "• %s: %s\n", name, thousands(s.tokens))
	}
	fmt.Fprintf(&b, "Tool schemas: %d tools, %s", len(u.tools), thousands(u.toolTokens))
	if len(u.tools) > 0 {
		var top []string
		for _, t := range u.tools[:min(3, len(u.tools))] {
			top = append(top, fmt.Sprintf("%s %s", t.name, thousands(t.tokens)))
		}
		fmt.Fprintf(&b, " (largest: %s)", strings.Join(top, ", "))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "History: %d of %d messages, %s", len(u.view.Messages), u.stored, thousands(u.historyTokens))
	if snap.Consolidated > 0 {
		fmt.Fprintf(&b, " (%d older ones are folded into memory)", snap.Consolidated)
	}
	b.WriteString("\n")
	var levels []string
	for l, c := range u.view.Levels {
		if c.Messages > 0 {
			levels = append(levels, fmt.Sprintf("%s %d (%s)", llm.Level(l), c.Messages, thousands(c.Tokens)))
		}
	}
	if len(levels) > 0 {
		fmt.Fprintf(&b, "• tool results and long inputs sent as %s\n", strings.Join(levels, ", "))
	}
	fmt.Fprintf(&b, "Total: %s of %s tokens (%s)\n", thousands(u.total()), thousands(u.window), percent(u.total(), u.window))
	if u.lastInput > 0 {
		fmt.Fprintf(&b, "The provider counted %s input tokens for this chat's last call.\n", thousands(u.lastInput))
	}
	b.WriteString(EstimateMethod)
	return b.String(), nil
}

// thousands writes n with thin separators a chat shows well: 128,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// percent is part of whole, rounded, as "14%"; "<1%" for a sliver.
func percent(part, whole int) string {
	if whole <= 0 {
		return "?%"
	}
	p := 100 * float64(part) / float64(whole)
	if part > 0 && p < 0.5 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}
