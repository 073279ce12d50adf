// Package commands is the one table of chat commands ("/new", "/help", …):
// each command's name, argument, description, order, who answers it, and
// whether platforms show it in their command menus. Every place that knows
// about commands reads this table: the Telegram and Discord menus
// (setMyCommands, slash commands), the channels' intake (/whoami), the
// agent's dispatch and /help, the terminal chat, and the daemon's /web.
// Adding a command is one row here plus its handler in the part named by
// the row's Handler.
//
// It is a leaf package (it imports nothing of this module) because both
// sides of the bus read it, and the channels and the agent must not import
// each other (arch_test.go). It is not part of internal/bus: the bus carries
// messages without interpreting their text, and what "/new" means is policy,
// not transport vocabulary.
package commands

import (
	"slices"
	"strings"
	"unicode"
)

// Handler says which part of the daemon answers a command.
type Handler int

const (
	// Agent commands are answered by the agent in the chat's order: they
	// wait for the running turn, like a message, because they change the
	// session (/new, /model).
	Agent Handler = iota + 1
	// AgentNow commands are answered by the agent at once, even while a
	// turn runs (/stop, /status, /help).
	AgentNow
	// Intake commands are answered by a channel's intake before the access
	// check, so a stranger can use them (/whoami, whose answer goes into an
	// allow list). Channels without an intake (the web page, the terminal)
	// pass them on, and the agent answers them at once.
	Intake
	// Daemon commands are answered by another part of the daemon through
	// agent.Deps.Commands (/web, by the web server); the agent routes them at
	// once without learning what they do.
	Daemon
)

func (h Handler) String() string {
	switch h {
	case Agent:
		return "agent"
	case AgentNow:
		return "agent-now"
	case Intake:
		return "intake"
	case Daemon:
		return "daemon"
	}
	return "unknown"
}

// Arg is a command's optional argument, for /help's usage line and
// Discord's slash-command option.
type Arg struct {
	Name        string
	Description string
}

// Command is one chat command.
type Command struct {
	// Name is typed after the slash; lower case, as both platforms require.
	Name string
	// Arg is the optional argument, or nil.
	Arg *Arg
	// Description is its line in /help and in the platform menus (at most
	// 100 characters, Discord's limit).
	Description string
	// Handler is the part of the daemon that answers it.
	Handler Handler
	// Menu lists it in the platforms' command menus. A command off the menu
	// still works when typed.
	Menu bool
}

// Usage is the command as /help shows it: "/model [name]".
func (c Command) Usage() string {
	if c.Arg == nil {
		return "/" + c.Name
	}
	return "/" + c.Name + " [" + c.Arg.Name + "]"
}

// table is the chat commands, in the order /help and the menus show them.
var table = []Command{
	{Name: "new", Description: "Start a new conversation (what matters is kept in memory)", Handler: Agent, Menu: true},
	{Name: "stop", Description: "Stop the current answer and background tasks", Handler: AgentNow, Menu: true},
	{Name: "model", Arg: &Arg{Name: "name", Description: "Model or route to switch this chat to (empty: show the current one)"},
		Description: "Show or switch this chat's model", Handler: Agent, Menu: true},
	{Name: "status", Description: "Model, token use, context use and session size", Handler: AgentNow, Menu: true},
	{Name: "context", Description: "What fills the prompt, in tokens: files, memory, skills, history, tool schemas", Handler: AgentNow, Menu: true},
	{Name: "usage", Arg: &Arg{Name: "footer", Description: "footer on or footer off: a line of tokens and cost under each answer"},
		Description: "Calls, tokens and cost today, this week and this month", Handler: AgentNow, Menu: true},
	{Name: "whoami", Description: "Show your user id (for allow lists)", Handler: Intake, Menu: true},
	// /web is off the menus: a login link is for the bot's owner, in a
	// direct message only, not for everyone who sees the menu.
	{Name: "web", Description: "Get a one-time link that logs a browser into the web page", Handler: Daemon},
	{Name: "budget", Arg: &Arg{Name: "lift", Description: "lift: let model calls run past the limits until midnight (owner only)"},
		Description: "Show today's and this month's spend against the budget", Handler: Daemon, Menu: true},
	{Name: "help", Description: "List the commands", Handler: AgentNow, Menu: true},
}

// All returns the commands in order. The slice is the caller's.
func All() []Command {
	return slices.Clone(table)
}

// Menu returns the commands the platform menus list, in order.
func Menu() []Command {
	return slices.DeleteFunc(All(), func(c Command) bool { return !c.Menu })
}

// Lookup returns the command called name (without the slash, any case).
func Lookup(name string) (Command, bool) {
	i := slices.IndexFunc(table, func(c Command) bool { return strings.EqualFold(c.Name, name) })
	if i < 0 {
		return Command{}, false
	}
	return table[i], true
}

// Parse recognises a command in a message's text: "/name args" or, as
// Telegram writes it in groups, "/name@bot args". Only names in the table
// are commands; "/etc/hosts?" is text.
func Parse(text string) (c Command, args string, ok bool) {
	s := strings.TrimSpace(text)
	if len(s) < 2 || s[0] != '/' {
		return Command{}, "", false
	}
	head, rest := s[1:], ""
	if i := strings.IndexFunc(head, unicode.IsSpace); i >= 0 {
		head, rest = head[:i], head[i:]
	}
	head, _, _ = strings.Cut(head, "@")
	c, ok = Lookup(head)
	if !ok {
		return Command{}, "", false
	}
	return c, strings.TrimSpace(rest), true
}
