package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/session"
)

// commands are handled without calling the model (S-A4).
var commands = map[string]string{
	"new":    "start a new conversation (what matters is kept in memory)",
	"stop":   "stop the current task",
	"help":   "list commands",
	"status": "model, tokens used, context use, session size, uptime",
	"model":  "show or switch the model: /model [route]",
	"whoami": "show your user id (for allow lists)",
}

// commandOrder is the order /help lists them in.
var commandOrder = []string{"new", "stop", "model", "status", "whoami", "help"}

// command runs a chat command and replies.
func (a *Agent) command(ctx context.Context, m bus.InboundMessage) {
	name, args, _ := parseCommand(m.Content)
	var reply string
	var err error
	switch name {
	case "help":
		reply = a.help()
	case "whoami":
		reply = fmt.Sprintf("Your %s user id is `%s` (chat `%s`).", m.Channel, m.SenderID, m.ChatID)
	case "status":
		reply, err = a.status(m.Key())
	case "model":
		reply, err = a.switchModel(m.Key(), args)
	case "new":
		reply, err = a.newSession(ctx, m)
	}
	if err != nil {
		a.log.Error("command failed", zap.String("command", name), zap.String("session", m.Key()), zap.Error(err))
		a.notify(ctx, m, reply, true)
		return
	}
	a.notify(ctx, m, reply, false)
}

func (a *Agent) help() string {
	var b strings.Builder
	b.WriteString("Commands:\n")
	for _, c := range commandOrder {
		fmt.Fprintf(&b, "/%s — %s\n", c, commands[c])
	}
	for _, name := range slices.Sorted(maps.Keys(a.extra)) {
		if _, builtin := commands[name]; !builtin {
			fmt.Fprintf(&b, "/%s — %s\n", name, a.extra[name].Description)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func (a *Agent) status(key string) (string, error) {
	snap, err := a.store.Get(key)
	if err != nil {
		return "I could not read this session's state; see the daemon log.", fmt.Errorf("status: %w", err)
	}
	route := a.routeOf(snap)
	var used, lastInput int
	for _, m := range snap.Messages {
		if m.Meta != nil && m.Meta.Usage.Total() > 0 {
			used += m.Meta.Usage.Total()
			lastInput = m.Meta.Usage.InputTokens
		}
	}
	window := a.model.ContextWindow(route)
	fill := lastInput
	if fill == 0 {
		fill = history.Project("", snap.Messages[snap.Consolidated:], history.Options{}).Tokens
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %s\n", route)
	fmt.Fprintf(&b, "Tokens used in this session: %d\n", used)
	fmt.Fprintf(&b, "Context: %d of %d tokens (%.0f%%)\n", fill, window, 100*float64(fill)/float64(max(window, 1)))
	fmt.Fprintf(&b, "Session: %d messages (%d consolidated into memory, %d not yet), %s on disk\n",
		len(snap.Messages), snap.Consolidated, len(snap.Messages)-snap.Consolidated, humanBytes(snap.Size))
	if line := a.memoryStatus(key); line != "" {
		b.WriteString(line + "\n")
	}
	if n := a.subs.running(key); n > 0 {
		fmt.Fprintf(&b, "Background tasks running: %d\n", n)
	}
	fmt.Fprintf(&b, "Uptime: %s\n", a.now().Sub(a.started).Round(time.Second))
	fmt.Fprintf(&b, "Version: %s", a.cfg.Version)
	if a.statusLines != nil {
		for _, l := range a.statusLines() {
			b.WriteString("\n" + l)
		}
	}
	return b.String(), nil
}

func (a *Agent) routeOf(snap session.Snapshot) string {
	if snap.Route != "" {
		return snap.Route
	}
	return a.model.Default()
}

func (a *Agent) switchModel(key, args string) (string, error) {
	snap, err := a.store.Get(key)
	if err != nil {
		return "I could not read this session's state; see the daemon log.", fmt.Errorf("model: %w", err)
	}
	current := a.routeOf(snap)
	if args == "" {
		var b strings.Builder
		fmt.Fprintf(&b, "Current model: %s\nAvailable:", current)
		routes := a.model.Routes()
		for _, r := range routes {
			mark := ""
			if r == current {
				mark = " (current)"
			}
			fmt.Fprintf(&b, "\n• %s%s", r, mark)
		}
		b.WriteString("\nSwitch with /model <name>; /model default goes back to the default.")
		return b.String(), nil
	}
	route := args
	if route == "default" {
		route = ""
	}
	if route != "" {
		if err := a.model.Check(route); err != nil {
			return fmt.Sprintf("I don't know the model %q. Try one of: %s", args, strings.Join(a.model.Routes(), ", ")), nil
		}
	}
	if err := a.store.SetMeta(key, session.MetaUpdate{Route: &route}); err != nil {
		return "I could not save the model choice; see the daemon log.", fmt.Errorf("model: %w", err)
	}
	if route == "" {
		route = a.model.Default()
	}
	return "Model for this chat: " + route, nil
}

// newSession folds what is not yet in memory into it, then archives the
// session and starts a fresh one (S-S3). If the consolidation fails, the
// session is kept so nothing is lost, and the user is told why.
func (a *Agent) newSession(ctx context.Context, m bus.InboundMessage) (string, error) {
	key := m.Key()
	saved := ""
	if a.memory != nil {
		snap, err := a.store.Get(key)
		if err != nil {
			return "I could not read this conversation, so I kept it. See the daemon log.", fmt.Errorf("new: %w", err)
		}
		if len(snap.Unconsolidated()) > 0 {
			a.notify(ctx, m, "💾 Saving this conversation to memory before starting a new one…", false)
			done, err := a.consolidateNow(ctx, key)
			if err != nil {
				return "⚠️ I could not save this conversation to memory (" + memoryFailure(err) +
					"), so I kept it; nothing was lost. Try /new again in a while.", fmt.Errorf("new: %w", err)
			}
			switch done {
			case consolidatedModel:
				saved = " What mattered in the last one is saved in memory."
			case consolidatedDump:
				saved = " The model could not summarise the last one, so I saved it as a transcript in memory/HISTORY.md."
			}
		}
	}
	path, err := a.store.Archive(key)
	a.tallies.forget(key)
	if err != nil {
		return "I could not start a new conversation; this one is kept. See the daemon log.", fmt.Errorf("new: %w", err)
	}
	if path != "" {
		a.log.Info("session archived", zap.String("session", key), zap.String("path", path))
	}
	return "Started a new conversation." + saved, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// CommandList returns the chat commands and their descriptions in /help
// order, for channels that register commands with the platform.
func CommandList() [][2]string {
	out := make([][2]string, 0, len(commandOrder))
	for _, c := range commandOrder {
		out = append(out, [2]string{c, commands[c]})
	}
	return slices.Clip(out)
}

// memoryStatus is /status's line about consolidation trouble, or "".
func (a *Agent) memoryStatus(key string) string {
	running, failures, retryAt, lastErr := a.mem.status(key)
	switch {
	case failures > 0:
		return fmt.Sprintf("Memory: the last %d consolidation(s) failed (%s); next try after %s",
			failures, memoryFailure(lastErr), retryAt.Format("15:04"))
	case running:
		return "Memory: consolidating now"
	}
	return ""
}

// memoryFailure says in a few words why a consolidation failed: memory's
// own failures here, a model call's as llm.Policies say.
func memoryFailure(err error) string {
	switch {
	case err == nil:
		return "unknown reason"
	case errors.Is(err, memory.ErrNoCall), errors.Is(err, memory.ErrBadArguments):
		return "the model did not answer in the form memory needs"
	case errors.Is(err, memory.ErrConflict):
		return "memory kept changing while it was being updated"
	}
	return llm.Classify(err).SafeReason()
}
