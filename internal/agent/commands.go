package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/memory"
	"github.com/nanobot-go/nanobot/internal/session"
)

// command runs a chat command the agent answers (commands.Agent,
// AgentNow and Intake, for channels without an intake) and replies. /stop
// is not here: dispatch runs it, since it acts on the queue.
func (a *Agent) command(ctx context.Context, m bus.InboundMessage) {
	c, args, _ := commandOf(m)
	r := &commandReply{a: a, ctx: ctx, m: m}
	var reply string
	var err error
	switch c.Name {
	case "help":
		reply = a.help()
	case "whoami":
		reply = fmt.Sprintf("Your %s user id is `%s` (chat `%s`).", m.Channel, m.SenderID, m.ChatID)
	case "status":
		reply, err = a.status(m)
	case "context":
		reply, err = a.contextReport(m.Key())
	case "usage":
		reply, err = a.usageAnswer(m, args)
	case "model":
		reply, err = a.switchModel(m.Key(), args)
	case "new":
		reply, err = a.newSession(ctx, m, r.progress)
	default:
		// A row added to the table without its handler here;
		// TestEveryCommandDispatches catches it.
		err = fmt.Errorf("no agent handler for /%s", c.Name)
		reply = "I know /" + c.Name + " but cannot answer it; see the daemon log."
	}
	if err != nil {
		a.log.Error("command failed", zap.String("command", c.Name), zap.String("session", m.Key()), zap.Error(err))
	}
	r.done(reply, err != nil)
}

// commandReply is how a command answers: one message, or, for a command
// that takes a while and says so (/new saving memory first), a turn — a
// start, its progress notes and a final carrying the outcome — so that a
// channel shows it is working, and the terminal and the API wait for the
// outcome rather than stop at the first note
// (docs/sessions.md#archives-new).
type commandReply struct {
	a      *Agent
	ctx    context.Context
	m      bus.InboundMessage
	turnID string // set once a progress note went out
}

// progress sends a note on the way to the outcome.
func (r *commandReply) progress(text string) {
	if r.turnID == "" {
		r.turnID = newTurnID()
		r.a.publish(r.ctx, r.out(bus.KindStart, ""))
	}
	r.a.publish(r.ctx, r.out(bus.KindMessage, text))
}

// done sends the outcome.
func (r *commandReply) done(text string, isErr bool) {
	if r.turnID == "" {
		r.a.notify(r.ctx, r.m, text, isErr)
		return
	}
	final := r.out(bus.KindFinal, text)
	final.IsError = isErr
	r.a.publish(r.ctx, final)
}

func (r *commandReply) out(kind bus.Kind, text string) bus.OutboundMessage {
	return bus.OutboundMessage{
		Channel: r.m.Channel, ChatID: r.m.ChatID, Kind: kind, Content: text,
		ReplyTo: r.m.MessageID, TurnID: r.turnID, Metadata: r.m.Metadata,
	}
}

// daemonCommands keeps the entries of deps.Commands the table gives to the
// daemon, and logs the others: a built-in cannot be shadowed, and a command
// missing from the table would be missing from every menu.
func daemonCommands(given map[string]Command, log *zap.Logger) map[string]Command {
	kept := make(map[string]Command, len(given))
	for name, c := range given {
		if tc, ok := commands.Lookup(name); !ok || tc.Handler != commands.Daemon || tc.Name != name {
			log.Error("chat command ignored: internal/commands does not give it to the daemon", zap.String("command", name))
			continue
		}
		kept[name] = c
	}
	return kept
}

// help lists the table's commands this agent can answer: all but the
// daemon's commands no part of this process answers.
func (a *Agent) help() string {
	var b strings.Builder
	b.WriteString("Commands:\n")
	for _, c := range commands.All() {
		if c.Handler == commands.Daemon && a.extra[c.Name].Answer == nil {
			continue
		}
		fmt.Fprintf(&b, "%s — %s\n", c.Usage(), c.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (a *Agent) status(m bus.InboundMessage) (string, error) {
	key := m.Key()
	snap, err := a.store.Get(key)
	if err != nil {
		return "I could not read this session's state; see the daemon log.", fmt.Errorf("status: %w", err)
	}
	var used int
	for _, m := range snap.Messages {
		if m.Meta != nil && m.Meta.Usage.Total() > 0 {
			used += m.Meta.Usage.Total()
		}
	}
	// The context line is /context's total: the same estimate of the next
	// call, system prompt and tool schemas included.
	u, err := a.promptUseOf(snap)
	if err != nil {
		return "I could not build the system prompt; see the daemon log.", fmt.Errorf("status: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %s\n", u.route)
	fmt.Fprintf(&b, "Tokens used in this session: %s\n", thousands(used))
	fmt.Fprintf(&b, "Context: %s of %s tokens (%s), estimated for the next call; /context shows what fills it\n",
		thousands(u.total()), thousands(u.window), percent(u.total(), u.window))
	if line, err := a.spentToday(m); err != nil {
		return "I could not read the usage ledger; see the daemon log.", fmt.Errorf("status: %w", err)
	} else if line != "" {
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "Session: %d messages (%d consolidated into memory, %d not yet), %s on disk\n",
		len(snap.Messages), snap.Consolidated, len(snap.Messages)-snap.Consolidated, bytesize.Format(snap.Size))
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
// session and starts a fresh one (docs/sessions.md#archives-new) on the
// model the chat had chosen: /model is the chat's choice, not the
// conversation's. If the consolidation fails, the session is kept so nothing
// is lost, and the user is told why. progress tells the user what takes a
// while.
func (a *Agent) newSession(ctx context.Context, m bus.InboundMessage, progress func(string)) (string, error) {
	key := m.Key()
	snap, err := a.store.Get(key)
	if err != nil {
		return "I could not read this conversation, so I kept it. See the daemon log.", fmt.Errorf("new: %w", err)
	}
	saved := ""
	if a.memory != nil && len(snap.Unconsolidated()) > 0 {
		progress("💾 Saving this conversation to memory before starting a new one…")
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
	path, err := a.store.Archive(key)
	a.tallies.forget(key)
	if err != nil {
		return "I could not start a new conversation; this one is kept. See the daemon log.", fmt.Errorf("new: %w", err)
	}
	if path != "" {
		a.log.Info("session archived", zap.String("session", key), zap.String("path", path))
	}
	if route := snap.Route; route != "" {
		if err := a.store.SetMeta(key, session.MetaUpdate{Route: &route}); err != nil {
			return fmt.Sprintf("⚠️ Started a new conversation, but I could not keep its model %s: it is on the default, %s, now. "+
				"/model %s switches back.", route, a.model.Default(), route), fmt.Errorf("new: keep route %s: %w", route, err)
		}
		saved += " Model: " + route + "."
	}
	return "Started a new conversation." + saved, nil
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
