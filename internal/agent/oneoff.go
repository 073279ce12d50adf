package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// This file holds what the agent does for senders that keep the
// conversation themselves (the OpenAI-compatible API): per-turn routes,
// re-sent history, and one-off turns that leave nothing behind. None of it
// names a transport; it follows fields of bus.InboundMessage.

// commandOf parses m's content as a chat command; an ephemeral message is
// never one (a one-off turn has no session to command).
func commandOf(m bus.InboundMessage) (c commands.Command, args string, ok bool) {
	if m.Ephemeral {
		return commands.Command{}, "", false
	}
	return commands.Parse(m.Content)
}

// outlivingTools are the tools whose effect outlasts the turn (a subagent
// announcing back, a job firing later); a one-off turn is not offered them,
// since nobody would be there to hear from them.
var outlivingTools = []string{SpawnToolName, "cron"}

// specsFor is the tool list offered in t.
func (t *turn) specsFor(all []llm.ToolSpec) []llm.ToolSpec {
	if !t.origin.Ephemeral {
		return all
	}
	return slices.DeleteFunc(slices.Clone(all), func(s llm.ToolSpec) bool { return slices.Contains(outlivingTools, s.Name) })
}

// execute runs one call, refusing in a one-off turn the tools it was not
// offered (a model may still name one).
func (a *Agent) execute(ctx context.Context, t *turn, c llm.ToolCall, origin tools.Origin) llm.ToolResult {
	if t.origin.Ephemeral && slices.Contains(outlivingTools, c.Name) {
		return llm.ToolResult{IsError: true, Content: llm.PlainContent(fmt.Sprintf(
			"%s is not available in a one-off conversation: nothing of it is kept after this answer.", c.Name))}
	}
	return a.tools.Execute(ctx, c, origin)
}

// routeFor is the route of t's model calls: the message's own, or the
// session's.
func (a *Agent) routeFor(t *turn, snap session.Snapshot) string {
	if t.origin.Model != "" {
		return t.origin.Model
	}
	return a.routeOf(snap)
}

// seed is what goes into an empty session before the turn's user message:
// the sender's re-sent history from its first user message after the last
// /new (what came before was archived, and the command's reply is not
// conversation), keeping only user and assistant text.
func seed(history []llm.Message) []llm.Message {
	start := 0
	for i, m := range history {
		if c, _, ok := commands.Parse(m.Text()); ok && c.Name == "new" && m.Role == llm.RoleUser {
			start = i + 1
		}
	}
	var out []llm.Message
	for _, m := range history[start:] {
		if m.Role != llm.RoleUser && (m.Role != llm.RoleAssistant || len(out) == 0) {
			continue
		}
		kept := llm.Message{Role: m.Role, Time: m.Time}
		for _, p := range m.Parts {
			if p.Kind == llm.PartText && strings.TrimSpace(p.Text) != "" {
				kept.Parts = append(kept.Parts, llm.Text(p.Text))
			}
		}
		if len(kept.Parts) > 0 && kept.Validate() == nil {
			out = append(out, kept)
		}
	}
	return out
}

// usage sums the token usage of t's model calls.
func (t *turn) usage() llm.Usage {
	var u llm.Usage
	for _, m := range t.msgs {
		if m.Role == llm.RoleAssistant && m.Meta != nil {
			u = u.Add(m.Meta.Usage)
		}
	}
	return u
}

// memSessions holds a one-off turn's session in memory; it is dropped with
// the turn, so nothing of it reaches the disk or memory consolidation.
type memSessions struct {
	mu   sync.Mutex
	snap session.Snapshot
}

func newMemSessions(key string) *memSessions {
	return &memSessions{snap: session.Snapshot{Key: key}}
}

func (s *memSessions) Get(string) (session.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, nil
}

func (s *memSessions) Append(_ string, msgs ...llm.Message) (session.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return s.snap, fmt.Errorf("append message %d: %w", i, err)
		}
	}
	all := append(slices.Clip(s.snap.Messages), msgs...)
	s.snap.Messages = slices.Clip(all)
	return s.snap, nil
}

// Stage is Append: there is no disk to wait for.
func (s *memSessions) Stage(key string, msgs ...llm.Message) (session.Snapshot, error) {
	return s.Append(key, msgs...)
}

func (s *memSessions) Sync(string) error { return nil }

func (s *memSessions) SetMeta(string, session.MetaUpdate) error { return nil }

func (s *memSessions) Archive(string) (string, error) { return "", nil }
