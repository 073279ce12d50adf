package history

import "github.com/nanobot-go/nanobot/internal/llm"

// Repair enforces the tool-call invariants (docs/history.md#projection) on a
// stored history without changing what is valid: leading non-user messages are
// dropped (a history never starts with an orphan tool result or an assistant
// reply), a tool message that does not answer the assistant message before it
// is dropped, results for unknown call ids are dropped, and every call without
// a result gets a synthetic error result. It returns msgs itself when nothing
// needs fixing, and never modifies msgs.
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
