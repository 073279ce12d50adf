package main

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

// seedSessions returns a Seed that gives each of the first chats a session
// of prior messages, the last tail of them not consolidated yet, written by
// the session store itself so the files are exactly what the gateway would
// have written.
func seedSessions(chats, prior, tail int) func(sessionsDir string) error {
	return func(dir string) error {
		store := session.NewStore(dir, session.Options{}, zap.NewNop())
		msgs := priorMessages(prior, time.Now().Add(-time.Duration(prior)*time.Minute))
		consolidated := prior - tail
		for i := range chats {
			key := sessionKey(chatID(i))
			if _, err := store.Append(key, msgs...); err != nil {
				_ = store.Close()
				return fmt.Errorf("seed %d messages: %w", prior, err)
			}
			if consolidated > 0 {
				if err := store.SetMeta(key, session.MetaUpdate{Consolidated: &consolidated}); err != nil {
					_ = store.Close()
					return fmt.Errorf("seed consolidation pointer: %w", err)
				}
			}
		}
		return store.Close()
	}
}

// steadyTail is how many messages a long session the daemon keeps has not
// consolidated yet, here: half its memory window (agents.memory_window's
// default when window is 0), rounded down to whole turns so the tail starts with a
// user message, and never more than the session.
func steadyTail(prior, window int) int {
	if window <= 0 {
		window = config.Defaults().Agents.MemoryWindow
	}
	tail := window / 2 / 2 * 2
	return min(prior, max(tail, 2))
}

// priorMessages is a conversation of n messages, user and assistant in
// turn, of the sizes a chat has: user messages of about 150 bytes with the
// context prefix the agent adds, answers of about 450.
func priorMessages(n int, from time.Time) []llm.Message {
	words := strings.Fields("the a plan meeting tomorrow draft notes list budget weather garden book train " +
		"call doctor friday project release review bug fix idea recipe dinner walk music photo trip")
	text := func(i, size int) string {
		var b strings.Builder
		for k := 0; b.Len() < size; k++ {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[(i*7+k*3)%len(words)])
		}
		return b.String() + "."
	}
	msgs := make([]llm.Message, n)
	for i := range msgs {
		at := from.Add(time.Duration(i) * time.Minute)
		if i%2 == 0 {
			prefix := fmt.Sprintf("[%s · telegram · chat -1001000000000 · from Bench]\n", at.UTC().Format("Mon 2006-01-02 15:04 MST"))
			msgs[i] = llm.Message{Role: llm.RoleUser, Time: at, Parts: []llm.Part{llm.Text(prefix + text(i, 90))}}
		} else {
			msgs[i] = llm.Message{Role: llm.RoleAssistant, Time: at, Parts: []llm.Part{llm.Text(text(i, 450))}}
		}
	}
	return msgs
}
