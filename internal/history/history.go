// Package history turns a session's stored entries into what one model call
// sees (S-V6): it repairs the tool-call invariants of S-V3, cuts the history
// at user-turn boundaries to fit a token budget, and estimates the tokens.
// Project is a pure function of its inputs, so the same session always
// projects to the same bytes (which keeps provider prompt caches warm).
package history

import (
	"github.com/nanobot-go/nanobot/internal/llm"
)

// Options bound a projection.
type Options struct {
	// Budget is the number of tokens the system prompt and the messages may
	// use together; 0 or less means no limit.
	Budget int
}

// View is one projection: the messages to send and their token estimate.
type View struct {
	System   string
	Messages []llm.Message
	// Tokens estimates System plus Messages.
	Tokens int
	// Omitted counts stored messages left out to fit the budget.
	Omitted int
}

// Project repairs msgs (see Repair) and keeps the newest user turns that fit
// opt.Budget together with system. The newest turn is always kept, even when
// it alone exceeds the budget: the provider's refusal is clearer than an
// empty request.
func Project(system string, msgs []llm.Message, opt Options) View {
	msgs = Repair(msgs)
	v := View{System: system, Tokens: EstimateText(system)}
	starts := turnStarts(msgs)
	if len(starts) == 0 {
		return v
	}
	// Walk the turns from newest to oldest, keeping whole turns.
	cut := len(msgs)
	for i := len(starts) - 1; i >= 0; i-- {
		t := 0
		for _, m := range msgs[starts[i]:cut] {
			t += Estimate(m)
		}
		if opt.Budget > 0 && v.Tokens+t > opt.Budget && cut != len(msgs) {
			break
		}
		v.Tokens += t
		cut = starts[i]
	}
	v.Messages = msgs[cut:]
	v.Omitted = cut
	return v
}

// turnStarts returns the index of every user message that starts a turn.
func turnStarts(msgs []llm.Message) []int {
	var starts []int
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			starts = append(starts, i)
		}
	}
	return starts
}

// Repair enforces the S-V3 invariants on a stored history without changing
// what is valid: leading non-user messages are dropped (a history never
// starts with an orphan tool result or an assistant reply), a tool message
// that does not answer the assistant message before it is dropped, results
// for unknown call ids are dropped, and every call without a result gets a
// synthetic error result. It returns msgs itself when nothing needs fixing.
func Repair(msgs []llm.Message) []llm.Message {
	if isClean(msgs) {
		return msgs
	}
	out := make([]llm.Message, 0, len(msgs))
	started := false
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if !started {
			if m.Role != llm.RoleUser {
				continue
			}
			started = true
		}
		switch m.Role {
		case llm.RoleTool:
			continue // tool messages are consumed with their assistant message
		case llm.RoleAssistant:
			calls := m.ToolCalls()
			out = append(out, m)
			if len(calls) == 0 {
				continue
			}
			var next *llm.Message
			if i+1 < len(msgs) && msgs[i+1].Role == llm.RoleTool {
				next = &msgs[i+1]
				i++
			}
			out = append(out, pairResults(calls, next))
		default:
			out = append(out, m)
		}
	}
	return out
}

// pairResults returns one tool message with exactly one result per call, in
// call order.
func pairResults(calls []llm.ToolCall, tool *llm.Message) llm.Message {
	have := map[string]llm.Part{}
	if tool != nil {
		for _, p := range tool.Parts {
			if p.Kind == llm.PartToolResult && p.Result != nil {
				if _, dup := have[p.Result.ToolCallID]; !dup {
					have[p.Result.ToolCallID] = p
				}
			}
		}
	}
	res := llm.Message{Role: llm.RoleTool, Parts: make([]llm.Part, 0, len(calls))}
	if tool != nil {
		res.Time, res.Meta = tool.Time, tool.Meta
	}
	for _, c := range calls {
		if p, ok := have[c.ID]; ok {
			res.Parts = append(res.Parts, p)
			continue
		}
		res.Parts = append(res.Parts, MissingResult(c))
	}
	return res
}

// MissingResult is the synthetic error result for a call that has none.
func MissingResult(c llm.ToolCall) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{
		ToolCallID: c.ID, Name: c.Name, IsError: true,
		Content: llm.PlainContent("error: no result was recorded for this tool call (it was interrupted)"),
	}}
}

// isClean reports whether msgs already satisfy every invariant Repair
// enforces, so the common case allocates nothing.
func isClean(msgs []llm.Message) bool {
	if len(msgs) > 0 && msgs[0].Role != llm.RoleUser {
		return false
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			calls := m.ToolCalls()
			if len(calls) == 0 {
				continue
			}
			if i+1 >= len(msgs) || msgs[i+1].Role != llm.RoleTool {
				return false
			}
			rs := msgs[i+1].ToolResults()
			if len(rs) != len(calls) || len(rs) != len(msgs[i+1].Parts) {
				return false
			}
			for j := range calls {
				if rs[j].ToolCallID != calls[j].ID {
					return false
				}
			}
		case llm.RoleTool:
			if i == 0 || msgs[i-1].Role != llm.RoleAssistant || len(msgs[i-1].ToolCalls()) == 0 {
				return false
			}
		}
	}
	return true
}

// Window returns the newest part of stored, followed by turn, that is
// enough to fill budget tokens: it starts at a user message at or before the
// point where the budget runs out. Projecting a long session therefore costs
// what its tail costs, not its length. With budget ≤ 0 it returns everything.
func Window(stored, turn []llm.Message, budget int) []llm.Message {
	start := 0
	if budget > 0 {
		used := 0
		for _, m := range turn {
			used += Estimate(m)
		}
		for i := len(stored) - 1; i >= 0; i-- {
			used += Estimate(stored[i])
			if used > budget && stored[i].Role == llm.RoleUser {
				start = i
				break
			}
		}
	}
	if len(turn) == 0 {
		return stored[start:]
	}
	out := make([]llm.Message, 0, len(stored)-start+len(turn))
	out = append(out, stored[start:]...)
	return append(out, turn...)
}
