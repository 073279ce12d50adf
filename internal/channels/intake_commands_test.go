package channels

import (
	"context"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/config"
)

// The intake answers exactly the commands the table gives it, before the
// access check (a stranger gets an answer), also in Telegram's group form
// "/name@bot"; every other command is the agent's, so a stranger's is denied
// and an allowed sender's is published.
func TestIntakeAnswersItsCommands(t *testing.T) {
	ctx := context.Background()
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{})
	for i, c := range commands.All() {
		id := string(rune('a' + i))
		stranger, _ := msg("9", "s"+id, "/"+c.Name+"@my_bot")
		owner, _ := msg("1", "o"+id, "/"+c.Name)
		vs, err := in.Admit(ctx, Arrival{Msg: stranger})
		if err != nil {
			t.Fatal(err)
		}
		vo, err := in.Admit(ctx, Arrival{Msg: owner})
		if err != nil {
			t.Fatal(err)
		}
		wantStranger, wantOwner := Denied, Published
		if c.Handler == commands.Intake {
			wantStranger, wantOwner = WhoAmI, WhoAmI
		}
		if vs != wantStranger || vo != wantOwner {
			t.Errorf("/%s (%v): stranger %v, owner %v; want %v, %v", c.Name, c.Handler, vs, vo, wantStranger, wantOwner)
		}
	}
	for _, r := range b.out {
		if strings.Contains(r.Content, "cannot answer") {
			t.Errorf("the intake has no answer for a command the table gives it: %q", r.Content)
		}
	}
	if len(b.out) == 0 {
		t.Error("the intake answered no command")
	}
}
