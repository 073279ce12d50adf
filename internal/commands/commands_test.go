package commands

import (
	"regexp"
	"strings"
	"testing"
)

// TestTable pins the whole table: adding, renaming or reordering a command
// is a decision, made here, that every menu, /help and dispatch follow.
func TestTable(t *testing.T) {
	want := []struct {
		usage, description string
		handler            Handler
		menu               bool
	}{
		{"/new", "Start a new conversation (what matters is kept in memory)", Agent, true},
		{"/stop", "Stop the current answer and background tasks", AgentNow, true},
		{"/model [name]", "Show or switch this chat's model", Agent, true},
		{"/status", "Model, token use, context use and session size", AgentNow, true},
		{"/context", "What fills the prompt, in tokens: files, memory, skills, history, tool schemas", AgentNow, true},
		{"/usage [footer]", "Calls, tokens and cost today, this week and this month", AgentNow, true},
		{"/whoami", "Show your user id (for allow lists)", Intake, true},
		{"/web", "Get a one-time link that logs a browser into the web page", Daemon, false},
		{"/budget [lift]", "Show today's and this month's spend against the budget", Daemon, true},
		{"/help", "List the commands", AgentNow, true},
	}
	all := All()
	if len(all) != len(want) {
		t.Fatalf("%d commands, want %d", len(all), len(want))
	}
	// Telegram allows [a-z0-9_]{1,32} and 3-256 characters of description;
	// Discord lower-case names up to 32 and descriptions up to 100.
	name := regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	for i, w := range want {
		c := all[i]
		if c.Usage() != w.usage || c.Description != w.description || c.Handler != w.handler || c.Menu != w.menu {
			t.Errorf("command %d = %s %q %v menu=%v, want %s %q %v menu=%v",
				i, c.Usage(), c.Description, c.Handler, c.Menu, w.usage, w.description, w.handler, w.menu)
		}
		if !name.MatchString(c.Name) || len(c.Description) < 3 || len(c.Description) > 100 {
			t.Errorf("/%s: a name or description the platforms refuse", c.Name)
		}
		if c.Arg != nil && (!name.MatchString(c.Arg.Name) || len(c.Arg.Description) > 100) {
			t.Errorf("/%s: an argument Discord refuses", c.Name)
		}
	}
	var menu []string
	for _, c := range Menu() {
		menu = append(menu, c.Name)
	}
	if got := strings.Join(menu, " "); got != "new stop model status context usage whoami budget help" {
		t.Errorf("Menu() = %s", got)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		text, name, args string
		ok               bool
	}{
		{"/new", "new", "", true},
		{"  /model  gpt-4o ", "model", "gpt-4o", true},
		{"/model@my_bot smart", "model", "smart", true},
		{"/WhoAmI", "whoami", "", true},
		{"/status\nplease", "status", "please", true},
		{"/web@my_bot", "web", "", true},
		{"/etc/hosts", "", "", false},
		{"/newer", "", "", false},
		{"hello /new", "", "", false},
		{"/", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range tests {
		c, args, ok := Parse(tc.text)
		if ok != tc.ok || c.Name != tc.name || args != tc.args {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, %v", tc.text, c.Name, args, ok, tc.name, tc.args, tc.ok)
		}
	}
}

// All hands out a copy: a caller cannot change the table.
func TestAllIsACopy(t *testing.T) {
	a := All()
	a[0].Name = "changed"
	if All()[0].Name != "new" {
		t.Fatal("All() shares the table")
	}
}
